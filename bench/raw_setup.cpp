// SPDX-License-Identifier: MIT
// weft-raw-bench's set-up, as a libfabric user writes it: fi_getinfo for the
// named provider, a passive endpoint (MSG) or an address vector (RDM), the
// names exchanged over a side channel, memory registered with requested keys.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "raw_end.hpp"

namespace weft::bench {
namespace raw {

namespace {

bool is_ip_format(std::uint32_t format)
{
    return format == FI_SOCKADDR || format == FI_SOCKADDR_IN || format == FI_SOCKADDR_IN6;
}

} // namespace

void ck(long r, const char* what)
{
    if (r < 0)
        throw std::runtime_error(fmt::format("{}: {} ({})", what, fi_strerror(static_cast<int>(-r)), r));
}

RawEnd::~RawEnd()
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

/// Server: choose the provider and endpoint type, listen/open, tell the
/// client, connect. The name is libfabric's (`FI_PROVIDER` syntax); without
/// --msg/--rdm a provider's MSG endpoints when it has them, as weft chooses.
void RawEnd::serve_setup(const std::string& host)
{
    path_ = cfg_.provider.empty() ? "tcp" : cfg_.provider;
    // "tcp;ofi_rxm" names an RDM path; a core provider without MSG endpoints runs RDM.
    msg_ = cfg_.kind ? *cfg_.kind == EndpointKind::msg : path_.find(';') == std::string::npos;
    if (!cfg_.kind && msg_ && !try_getinfo(host, nullptr, 0))
        msg_ = false;
    if (!info_)
        getinfo(host, nullptr, 0); // throws saying why when there is none
    path_ = info_->fabric_attr->prov_name; // "tcp;ofi_rxm" where "tcp" + RDM asked for it
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
    // The client's half of the choice: provider, endpoint type, address format.
    std::vector<std::byte> hello(path_.size() + 1 + 1 + 4);
    std::memcpy(hello.data(), path_.c_str(), path_.size() + 1);
    hello[path_.size() + 1] = std::byte{msg_ ? std::uint8_t{1} : std::uint8_t{0}};
    const std::uint32_t format = info_->addr_format;
    std::memcpy(hello.data() + path_.size() + 2, &format, 4);
    hello.insert(hello.end(), name.begin(), name.end());
    side_.send(detail::Frame::offer, hello, Deadline::after(cfg_.timeout));
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
        (void)side_.receive(detail::Frame::ready, Deadline::after(cfg_.timeout));
    } else {
        const auto peer = side_.receive(detail::Frame::ready, Deadline::after(cfg_.timeout));
        ck(fi_av_insert(av_, peer.data(), 1, &peer_, 0, nullptr) == 1 ? 0 : -FI_EINVAL, "fi_av_insert");
    }
    side_.send(detail::Frame::ready, {}, Deadline::after(cfg_.timeout));
}

void RawEnd::connect_setup(const std::string& host)
{
    const auto hello = side_.receive(detail::Frame::offer, Deadline::after(cfg_.timeout));
    const auto nul = std::find(hello.begin(), hello.end(), std::byte{0});
    if (hello.end() - nul < 6)
        throw std::runtime_error("malformed hello from the raw benchmark's server");
    path_.assign(reinterpret_cast<const char*>(hello.data()),
                 static_cast<std::size_t>(nul - hello.begin()));
    msg_ = nul[1] == std::byte{1};
    std::memcpy(&addr_format_, &nul[2], 4);
    const std::vector<std::byte> name(nul + 6, hello.end());
    if (msg_) {
        getinfo("", name.data(), name.size());
        open_common();
        open_ep(info_);
        ck(fi_connect(ep_, name.data(), nullptr, 0), "fi_connect");
        fi_eq_cm_entry entry{};
        std::uint32_t event = 0;
        ck(fi_eq_sread(eq_, &event, &entry, sizeof entry, eq_wait_ms(), 0), "fi_eq_sread(connected)");
        side_.send(detail::Frame::ready, {}, Deadline::after(cfg_.timeout));
    } else {
        getinfo(host, nullptr, 0);
        open_common();
        open_ep(info_);
        ck(fi_av_insert(av_, name.data(), 1, &peer_, 0, nullptr) == 1 ? 0 : -FI_EINVAL, "fi_av_insert");
        std::vector<std::byte> mine(256);
        std::size_t len = mine.size();
        ck(fi_getname(&ep_->fid, mine.data(), &len), "fi_getname");
        mine.resize(len);
        side_.send(detail::Frame::ready, mine, Deadline::after(cfg_.timeout));
    }
    (void)side_.receive(detail::Frame::ready, Deadline::after(cfg_.timeout));
}

std::string RawEnd::describe() const
{
    return fmt::format("{} {}", path_, msg_ ? "MSG" : "RDM");
}

bool RawEnd::try_getinfo(const std::string& node, const void* dest, std::size_t dest_len, int* error)
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
    // Bound to `node` where the provider's addresses are IP addresses (tcp,
    // verbs: the format it reports says so); shm names its endpoints itself.
    int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info_);
    if (ret == 0 && !node.empty() && !dest && is_ip_format(info_->addr_format)) {
        fi_freeinfo(info_);
        ret = fi_getinfo(FI_VERSION(1, 17), node.c_str(), nullptr, FI_SOURCE, hints, &info_);
    }
    fi_freeinfo(hints);
    if (error)
        *error = ret;
    if (ret != 0) {
        info_ = nullptr;
        return false;
    }
    mr_mode_ = static_cast<unsigned>(info_->domain_attr->mr_mode);
    inject_ = info_->tx_attr->inject_size;
    return true;
}

void RawEnd::getinfo(const std::string& node, const void* dest, std::size_t dest_len)
{
    int error = 0;
    if (!try_getinfo(node, dest, dest_len, &error))
        ck(error, fmt::format("fi_getinfo({} {})", path_, msg_ ? "MSG" : "RDM").c_str());
}

void RawEnd::open_common()
{
    ck(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    ck(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_eq_attr eq_attr{};
    eq_attr.wait_obj = FI_WAIT_UNSPEC;
    if (msg_)
        ck(fi_eq_open(fabric_, &eq_attr, &eq_, nullptr), "fi_eq_open");
}

void RawEnd::open_ep(fi_info* info)
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
int RawEnd::eq_wait_ms() const
{
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.timeout).count());
}

std::byte* RawEnd::alloc(std::size_t n)
{
    void* p = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    std::memset(p, 0, n);
    buffers_.push_back(p);
    return static_cast<std::byte*>(p);
}

fid_mr* RawEnd::reg(std::byte* buf, std::size_t n, std::uint64_t access)
{
    fid_mr* mr = nullptr;
    ck(fi_mr_reg(domain_, buf, n, access, 0, ++next_key_, 0, &mr, nullptr), "fi_mr_reg");
    mrs_.push_back(mr);
    return mr;
}

void RawEnd::prepare(const Plan& plan)
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
    side_.send(detail::Frame::region, std::as_bytes(std::span(mine)), Deadline::after(cfg_.timeout));
    const auto theirs = side_.receive(detail::Frame::region, Deadline::after(cfg_.timeout));
    std::memcpy(&peer_addr_, theirs.data(), 8);
    std::memcpy(&peer_key_, theirs.data() + 8, 8);
    barrier();
}

void RawEnd::barrier()
{
    side_.send(detail::Frame::barrier, {}, Deadline::after(cfg_.timeout));
    (void)side_.receive(detail::Frame::barrier, Deadline::after(cfg_.timeout));
}

} // namespace raw

Factory raw_factory()
{
    return Factory{
        "raw",
        [](const Config& cfg, SideListener& listener) -> std::unique_ptr<End> {
            auto end = std::make_unique<raw::RawEnd>(listener.accept(Deadline::after(cfg.timeout)), cfg);
            end->serve_setup(cfg.node.empty() ? listener.host() : cfg.node);
            return end;
        },
        [](const Config& cfg, const std::string& host_port) -> std::unique_ptr<End> {
            const auto [host, port] = host_and_port(host_port);
            auto side = SideChannel::connect(host, port, Deadline::after(cfg.timeout));
            auto end = std::make_unique<raw::RawEnd>(std::move(side), cfg);
            end->connect_setup(cfg.node.empty() ? host : cfg.node);
            return end;
        }};
}

} // namespace weft::bench
