// SPDX-License-Identifier: MIT
// weft-raw-bench: the benchmark patterns written directly against libfabric's C
// API, as a careful user would without weft: the yardstick for weft's cost,
// measured in the same run. Only the set-up borrows weft's side channel (for
// exchanging addresses and keys) and provider-name parsing; the data path is raw.
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <fmt/format.h>

#include "traits.hpp"
#include "raw_bench.hpp"

namespace weft::bench {
namespace {

using namespace std::chrono;

void ck(long r, const char* what)
{
    if (r < 0)
        throw std::runtime_error(fmt::format("{}: {} ({})", what, fi_strerror(static_cast<int>(-r)), r));
}

std::uint64_t tail_stamp(const std::byte* region, std::size_t size)
{
    std::atomic_thread_fence(std::memory_order_acquire);
    std::uint64_t v = 0;
    std::memcpy(&v, size >= 8 ? region + size - 8 : region, std::min<std::size_t>(size, 8));
    return v;
}

std::uint64_t masked(std::uint64_t stamp, std::size_t size)
{
    return size >= 8 ? stamp : stamp & ((std::uint64_t{1} << (8 * size)) - 1);
}

class RawEnd final : public End {
public:
    RawEnd(SideChannel side, const Config& cfg) : side_(std::move(side)), cfg_(cfg) {}
    ~RawEnd() override
    {
        // Endpoint first, then what it used; exposed memory after the endpoint.
        if (ep_) fi_close(&ep_->fid);
        if (pep_) fi_close(&pep_->fid);
        for (auto* mr : mrs_) fi_close(&mr->fid);
        if (av_) fi_close(&av_->fid);
        if (cq_) fi_close(&cq_->fid);
        if (eq_) fi_close(&eq_->fid);
        if (domain_) fi_close(&domain_->fid);
        if (fabric_) fi_close(&fabric_->fid);
        for (auto* p : buffers_) std::free(p);
        fi_freeinfo(conn_info_);
        fi_freeinfo(info_);
    }

    /// Server: choose, listen/open, tell the client, connect.
    void serve_setup(const std::string& host)
    {
        const EndpointKind* kind = cfg_.kind ? &*cfg_.kind : nullptr;
        const auto req = providers::parse_request(cfg_.provider.empty() ? "tcp" : cfg_.provider, kind);
        path_ = req.path;
        msg_ = req.kind == EndpointKind::msg;
        getinfo(host, nullptr, 0, 0);
        open_common();
        std::vector<std::byte> name(256);
        std::size_t len = name.size();
        if (msg_) {
            ck(fi_passive_ep(fabric_, info_, &pep_, nullptr), "fi_passive_ep");
            ck(fi_pep_bind(pep_, &eq_->fid, 0), "fi_pep_bind");
            ck(fi_listen(pep_), "fi_listen");
            ck(fi_getname(&pep_->fid, name.data(), &len), "fi_getname");
        } else {
            open_ep(info_);
            ck(fi_getname(&ep_->fid, name.data(), &len), "fi_getname");
        }
        name.resize(len);
        std::vector<std::byte> hello(path_.size() + 1 + 4);
        std::memcpy(hello.data(), path_.c_str(), path_.size() + 1);
        const std::uint32_t format = info_->addr_format;
        std::memcpy(hello.data() + path_.size() + 1, &format, 4);
        hello.insert(hello.end(), name.begin(), name.end());
        side_.send(Frame::offer, hello, Deadline::after(cfg_.timeout));
        if (msg_) {
            fi_eq_cm_entry entry{};
            std::uint32_t event = 0;
            ck(fi_eq_sread(eq_, &event, &entry, sizeof entry, eq_wait_ms(), 0), "fi_eq_sread(connreq)");
            if (event != FI_CONNREQ)
                throw std::runtime_error("expected FI_CONNREQ");
            conn_info_ = entry.info;
            open_ep(conn_info_);
            ck(fi_accept(ep_, nullptr, 0), "fi_accept");
            ck(fi_eq_sread(eq_, &event, &entry, sizeof entry, eq_wait_ms(), 0), "fi_eq_sread(connected)");
            (void)side_.receive(Frame::ready, Deadline::after(cfg_.timeout));
        } else {
            const auto peer = side_.receive(Frame::ready, Deadline::after(cfg_.timeout));
            ck(fi_av_insert(av_, peer.data(), 1, &peer_, 0, nullptr) == 1 ? 0 : -FI_EINVAL, "fi_av_insert");
        }
        side_.send(Frame::ready, {}, Deadline::after(cfg_.timeout));
    }

    void connect_setup(const std::string& host)
    {
        const auto hello = side_.receive(Frame::offer, Deadline::after(cfg_.timeout));
        path_ = reinterpret_cast<const char*>(hello.data());
        std::memcpy(&addr_format_, hello.data() + path_.size() + 1, 4);
        const std::vector<std::byte> name(hello.begin() + static_cast<std::ptrdiff_t>(path_.size() + 5),
                                          hello.end());
        msg_ = !providers::is_layered(path_) && providers::traits_for(path_).msg_path == path_ &&
               cfg_.kind != EndpointKind::rdm;
        if (msg_) {
            getinfo("", name.data(), name.size(), 0);
            open_common();
            open_ep(info_);
            ck(fi_connect(ep_, name.data(), nullptr, 0), "fi_connect");
            fi_eq_cm_entry entry{};
            std::uint32_t event = 0;
            ck(fi_eq_sread(eq_, &event, &entry, sizeof entry, eq_wait_ms(), 0), "fi_eq_sread(connected)");
            side_.send(Frame::ready, {}, Deadline::after(cfg_.timeout));
        } else {
            getinfo(host, nullptr, 0, 0);
            open_common();
            open_ep(info_);
            ck(fi_av_insert(av_, name.data(), 1, &peer_, 0, nullptr) == 1 ? 0 : -FI_EINVAL, "fi_av_insert");
            std::vector<std::byte> mine(256);
            std::size_t len = mine.size();
            ck(fi_getname(&ep_->fid, mine.data(), &len), "fi_getname");
            mine.resize(len);
            side_.send(Frame::ready, mine, Deadline::after(cfg_.timeout));
        }
        (void)side_.receive(Frame::ready, Deadline::after(cfg_.timeout));
    }

    std::string describe() const override
    {
        return fmt::format("{} {}", path_, msg_ ? "MSG" : "RDM");
    }
    SideChannel& side() override { return side_; }

    double round(const Plan& plan) override
    {
        send_plan(side_, plan, Deadline::after(cfg_.timeout));
        prepare(plan);
        const auto start = steady_clock::now();
        switch (plan.pattern) {
        case Pattern::lat_write: lat_write(plan); break;
        case Pattern::lat_read: lat_read(plan); break;
        case Pattern::lat_notify: lat_notify(plan); break;
        case Pattern::rate: rate(plan); break;
        case Pattern::cpu_write: cpu_write(plan); break;
        default: windowed(plan); break;
        }
        if (plan.pattern == Pattern::bw_notify)
            barrier();
        const double seconds = duration<double>(steady_clock::now() - start).count();
        if (plan.pattern != Pattern::bw_notify)
            barrier();
        return seconds;
    }

    void serve(const Plan& plan) override
    {
        prepare(plan);
        const std::size_t size = plan.size;
        if (plan.pattern == Pattern::lat_write) {
            for (std::uint64_t i = 1; i <= plan.iterations; ++i) {
                while (tail_stamp(mine_, size) != masked(i, size))
                    reap();
                write(mine_, size, 0);
            }
        } else if (plan.pattern == Pattern::lat_notify) {
            for (std::uint64_t i = 0; i < plan.iterations; ++i) {
                wait_remote_data();
                expected_ = 0;
                writedata(mine_, size);
                if (expected_)
                    wait_own(expected_);
            }
        } else if (plan.pattern == Pattern::bw_notify) {
            for (std::uint64_t i = 0; i < plan.iterations; ++i)
                wait_remote_data();
        }
        while (!side_.readable())
            reap();
        barrier();
    }

private:
    void getinfo(const std::string& node, const void* dest, std::size_t dest_len, std::uint64_t)
    {
        fi_info* hints = fi_allocinfo();
        hints->fabric_attr->prov_name = strdup(path_.c_str());
        hints->caps = FI_MSG | FI_RMA;
        hints->ep_attr->type = msg_ ? FI_EP_MSG : FI_EP_RDM;
        hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
        hints->domain_attr->threading = FI_THREAD_DOMAIN;
        hints->mode = FI_RX_CQ_DATA;
        if (dest) {
            hints->dest_addr = std::malloc(dest_len);
            std::memcpy(hints->dest_addr, dest, dest_len);
            hints->dest_addrlen = dest_len;
            hints->addr_format = addr_format_;
        }
        const bool ip = providers::traits_for(path_).ip_addressing;
        const char* n = ip && !node.empty() ? node.c_str() : nullptr;
        const int ret = fi_getinfo(FI_VERSION(1, 17), n, nullptr, n ? FI_SOURCE : 0, hints, &info_);
        fi_freeinfo(hints);
        ck(ret, "fi_getinfo");
        mr_mode_ = static_cast<unsigned>(info_->domain_attr->mr_mode);
        inject_ = info_->tx_attr->inject_size;
    }

    void open_common()
    {
        ck(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
        ck(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
        fi_eq_attr eq_attr{};
        eq_attr.wait_obj = FI_WAIT_UNSPEC;
        if (msg_)
            ck(fi_eq_open(fabric_, &eq_attr, &eq_, nullptr), "fi_eq_open");
    }

    void open_ep(fi_info* info)
    {
        // Selective completions where the provider takes FI_COMPLETION as a
        // default op flag; verbs refuses it, and there every operation
        // completes (rate()'s unsignaled writes carry no context of ours).
        const auto tx_flags = info->tx_attr->op_flags;
        info->tx_attr->op_flags |= FI_COMPLETION;
        const bool selective = fi_endpoint(domain_, info, &ep_, nullptr) == 0;
        if (!selective) {
            info->tx_attr->op_flags = tx_flags;
            ck(fi_endpoint(domain_, info, &ep_, nullptr), "fi_endpoint");
        }
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_DATA;
        cq_attr.wait_obj = FI_WAIT_NONE;
        cq_attr.size = info->tx_attr->size + info->rx_attr->size;
        ck(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");
        ck(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV | (selective ? FI_SELECTIVE_COMPLETION : 0)),
           "fi_ep_bind(cq)");
        if (msg_) {
            ck(fi_ep_bind(ep_, &eq_->fid, 0), "fi_ep_bind(eq)");
        } else {
            fi_av_attr av_attr{};
            av_attr.type = FI_AV_TABLE;
            ck(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
            ck(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
        }
        ck(fi_enable(ep_), "fi_enable");
        // Receives for remote CQ data where the provider consumes one (FI_RX_CQ_DATA).
        recv_buf_ = alloc(4096);
        fid_mr* mr = reg(recv_buf_, 4096, FI_RECV);
        recv_desc_ = fi_mr_desc(mr);
        for (int i = 0; i < 16; ++i)
            ck(fi_recv(ep_, recv_buf_ + 256 * i, 256, recv_desc_, FI_ADDR_UNSPEC, &recv_ctx_[i]), "fi_recv");
    }

    /// A connection event arrives within the run's timeout or not at all.
    int eq_wait_ms() const
    {
        return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.timeout).count());
    }

    std::byte* alloc(std::size_t n)
    {
        void* p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
        std::memset(p, 0, n);
        buffers_.push_back(p);
        return static_cast<std::byte*>(p);
    }

    fid_mr* reg(std::byte* buf, std::size_t n, std::uint64_t access)
    {
        fid_mr* mr = nullptr;
        ck(fi_mr_reg(domain_, buf, n, access, 0, ++next_key_, 0, &mr, nullptr), "fi_mr_reg");
        mrs_.push_back(mr);
        return mr;
    }

    void prepare(const Plan& plan)
    {
        const std::size_t need = region_size(plan.pattern, plan.size, plan.queue_depth);
        if (need > cap_) {
            cap_ = need;
            mine_ = alloc(need);
            src_ = alloc(need);
            fid_mr* m = reg(mine_, need, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
            fid_mr* s = reg(src_, need, FI_READ | FI_WRITE | FI_SEND | FI_RECV);
            mine_desc_ = fi_mr_desc(m);
            src_desc_ = fi_mr_desc(s);
            my_key_ = fi_mr_key(m);
        }
        std::memset(mine_, 0, need);
        std::array<std::uint64_t, 2> mine{(mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<std::uintptr_t>(mine_) : 0,
                                          my_key_};
        side_.send(Frame::region, std::as_bytes(std::span(mine)), Deadline::after(cfg_.timeout));
        const auto theirs = side_.receive(Frame::region, Deadline::after(cfg_.timeout));
        std::memcpy(&peer_addr_, theirs.data(), 8);
        std::memcpy(&peer_key_, theirs.data() + 8, 8);
        barrier();
    }

    void barrier()
    {
        side_.send(Frame::barrier, {}, Deadline::after(cfg_.timeout));
        (void)side_.receive(Frame::barrier, Deadline::after(cfg_.timeout));
    }

    /// Reads completions: counts our own finished operations into own_ and
    /// the peer's notifications into remote_data_; reposts consumed receives.
    void reap()
    {
        std::array<fi_cq_data_entry, 16> e;
        const ssize_t n = fi_cq_read(cq_, e.data(), e.size());
        if (n == -FI_EAGAIN)
            return;
        if (n < 0) {
            fi_cq_err_entry err{};
            fi_cq_readerr(cq_, &err, 0);
            throw std::runtime_error(fmt::format("completion error: {}", fi_strerror(err.err)));
        }
        for (ssize_t i = 0; i < n; ++i) {
            // A peer's notification has no context of ours (an initiator's own
            // writedata completion may carry FI_REMOTE_CQ_DATA too).
            const bool own_context = e[static_cast<std::size_t>(i)].op_context == &ctx_;
            if ((e[static_cast<std::size_t>(i)].flags & FI_REMOTE_CQ_DATA) && !own_context) {
                ++remote_data_;
                repost(e[static_cast<std::size_t>(i)].op_context);
            } else if (own_context) {
                ++own_;
            } else {
                repost(e[static_cast<std::size_t>(i)].op_context);
            }
        }
    }

    void repost(void* ctx)
    {
        for (int i = 0; i < 16; ++i)
            if (ctx == &recv_ctx_[i])
                ck(fi_recv(ep_, recv_buf_ + 256 * i, 256, recv_desc_, FI_ADDR_UNSPEC, &recv_ctx_[i]), "fi_recv");
    }

    // Every wait has a deadline, checked now and then.
    void check_deadline(std::uint32_t& spins, const Deadline& deadline) const
    {
        if ((++spins & 1023u) == 0 && deadline.expired())
            throw std::runtime_error("no completion before the deadline: is the peer alive?");
    }

    void wait_own(std::size_t n)
    {
        const auto deadline = Deadline::after(cfg_.timeout);
        std::uint32_t spins = 0;
        while (own_ < n) {
            reap();
            check_deadline(spins, deadline);
        }
        own_ -= n;
    }

    void wait_remote_data()
    {
        const auto deadline = Deadline::after(cfg_.timeout);
        std::uint32_t spins = 0;
        while (remote_data_ == 0) {
            reap();
            check_deadline(spins, deadline);
        }
        --remote_data_;
    }

    template <class F>
    void post(F&& f)
    {
        for (;;) {
            const ssize_t r = f();
            if (r == 0)
                return;
            if (r != -FI_EAGAIN)
                ck(r, "post");
            reap();
        }
    }

    void write(std::byte* from, std::size_t size, std::uint64_t offset)
    {
        if (size <= inject_)
            post([&] { return fi_inject_write(ep_, from, size, peer_, peer_addr_ + offset, peer_key_); });
        else
            post([&] { return fi_write(ep_, from, size, from == mine_ ? mine_desc_ : src_desc_, peer_, peer_addr_ + offset, peer_key_, &ctx_); });
    }

    void writedata(std::byte* from, std::size_t size)
    {
        if (size <= inject_)
            post([&] { return fi_inject_writedata(ep_, from, size, 0, peer_, peer_addr_, peer_key_); });
        else {
            post([&] { return fi_writedata(ep_, from, size, from == mine_ ? mine_desc_ : src_desc_, 0, peer_, peer_addr_, peer_key_, &ctx_); });
            ++expected_;
        }
    }

    void lat_write(const Plan& plan)
    {
        const std::size_t size = plan.size;
        for (std::uint64_t i = 1; i <= plan.iterations; ++i) {
            std::memcpy(size >= 8 ? src_ + size - 8 : src_, &i, std::min<std::size_t>(size, 8));
            write(src_, size, 0);
            while (tail_stamp(mine_, size) != masked(i, size))
                reap();
        }
    }

    void lat_read(const Plan& plan)
    {
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            post([&] { return fi_read(ep_, src_, plan.size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
            wait_own(1);
        }
    }

    void lat_notify(const Plan& plan)
    {
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            expected_ = 0;
            writedata(src_, plan.size);
            wait_remote_data();
            if (expected_)
                wait_own(expected_);
        }
    }

    void windowed(const Plan& plan)
    {
        const std::size_t size = plan.size;
        const std::uint64_t depth = std::max<std::uint64_t>(1, plan.queue_depth);
        const std::uint64_t blocks = iops_region / size;
        std::uint64_t posted = 0, x = 0x9E3779B97F4A7C15ull;
        own_ = 0;
        while (own_ < plan.iterations) {
            while (posted < plan.iterations && posted - own_ < depth) {
                switch (plan.pattern) {
                case Pattern::bw_write:
                    post([&] { return fi_write(ep_, src_, size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
                    break;
                case Pattern::bw_read:
                    post([&] { return fi_read(ep_, src_, size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
                    break;
                case Pattern::bw_notify:
                    post([&] { return fi_writedata(ep_, src_, size, src_desc_, 0, peer_, peer_addr_, peer_key_, &ctx_); });
                    break;
                default: {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    const std::uint64_t off = (x % blocks) * size;
                    post([&] { return fi_read(ep_, src_ + off, size, src_desc_, peer_, peer_addr_ + off, peer_key_, &ctx_); });
                }
                }
                ++posted;
            }
            reap();
        }
        own_ = 0;
    }

    void rate(const Plan& plan)
    {
        constexpr std::size_t batch = 16;
        const std::uint64_t window = std::max<std::uint64_t>(1, plan.queue_depth / batch);
        std::uint64_t posted = 0, signaled = 0;
        own_ = 0;
        while (own_ < signaled || posted < plan.iterations) {
            while (posted < plan.iterations && signaled - own_ < window) {
                for (std::size_t k = 0; k < batch; ++k) {
                    const bool last = k + 1 == batch;
                    iovec iov{src_ + k * plan.size, plan.size};
                    void* desc = src_desc_;
                    fi_rma_iov rma{peer_addr_ + k * plan.size, plan.size, peer_key_};
                    // tcp completes unsignaled writes anyway: give them no context of ours.
                    fi_msg_rma msg{&iov, &desc, 1, peer_, &rma, 1, last ? &ctx_ : nullptr, 0};
                    const std::uint64_t flags = last ? FI_COMPLETION : (FI_MORE | (plan.size <= inject_ ? FI_INJECT : 0));
                    post([&] { return fi_writemsg(ep_, &msg, flags); });
                }
                ++signaled;
                posted += batch;
            }
            reap();
        }
        own_ = 0;
    }

    void cpu_write(const Plan& plan)
    {
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            if (plan.size <= inject_) {
                post([&] { return fi_inject_write(ep_, src_, plan.size, peer_, peer_addr_, peer_key_); });
            } else {
                post([&] { return fi_write(ep_, src_, plan.size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
                wait_own(1);
            }
        }
    }

    SideChannel side_;
    const Config& cfg_;
    std::string path_;
    bool msg_ = true;
    fi_info* info_ = nullptr;
    fi_info* conn_info_ = nullptr; // kept until the endpoint closes
    std::uint32_t addr_format_ = FI_FORMAT_UNSPEC;
    fid_fabric* fabric_ = nullptr;
    fid_domain* domain_ = nullptr;
    fid_eq* eq_ = nullptr;
    fid_pep* pep_ = nullptr;
    fid_ep* ep_ = nullptr;
    fid_cq* cq_ = nullptr;
    fid_av* av_ = nullptr;
    fi_addr_t peer_ = FI_ADDR_UNSPEC;
    std::vector<fid_mr*> mrs_;
    std::vector<void*> buffers_;
    unsigned mr_mode_ = 0;
    std::size_t inject_ = 0;
    std::uint64_t next_key_ = 0x5eed0000;
    std::byte* recv_buf_ = nullptr;
    void* recv_desc_ = nullptr;
    int recv_ctx_[16] = {};
    std::byte* mine_ = nullptr;
    std::byte* src_ = nullptr;
    void* mine_desc_ = nullptr;
    void* src_desc_ = nullptr;
    std::uint64_t my_key_ = 0;
    std::size_t cap_ = 0;
    std::uint64_t peer_addr_ = 0;
    std::uint64_t peer_key_ = 0;
    std::uint64_t remote_data_ = 0;
    std::uint64_t own_ = 0;
    std::size_t expected_ = 0;
    int ctx_ = 0;
};

} // namespace

Factory raw_factory()
{
    return Factory{
        "raw",
        [](const Config& cfg, SideListener& listener) -> std::unique_ptr<End> {
            auto end = std::make_unique<RawEnd>(listener.accept(Deadline::after(cfg.timeout)), cfg);
            end->serve_setup(cfg.node.empty() ? listener.host() : cfg.node);
            return end;
        },
        [](const Config& cfg, const std::string& host_port) -> std::unique_ptr<End> {
            const auto [host, port] = split_host_port(host_port);
            auto side = SideChannel::connect(host, port, Deadline::after(cfg.timeout));
            auto end = std::make_unique<RawEnd>(std::move(side), cfg);
            end->connect_setup(cfg.node.empty() ? host : cfg.node);
            return end;
        }};
}

} // namespace weft::bench
