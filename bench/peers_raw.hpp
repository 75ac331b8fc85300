// SPDX-License-Identifier: MIT
// weft-peers-bench's raw-libfabric side (peers_raw.cpp, peers_raw_traffic.cpp):
// what a weft Node does for a hub and its peers, with nothing but fi_* calls.
#pragma once

#include <netinet/in.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <fmt/format.h>

#include "peers.hpp"

namespace weft::peers::raw {

inline void ok(int ret, const char* what)
{
    if (ret != 0)
        throw std::runtime_error(fmt::format("{}: {} ({})", what, fi_strerror(-ret), ret));
}

constexpr std::size_t slots = 16;
constexpr std::size_t slot_size = 8192;

/// One endpoint's posted receives and a send buffer, registered.
struct Buffers {
    std::vector<char> memory = std::vector<char>((slots + 1) * slot_size);
    fid_mr* mr = nullptr;
    std::uint32_t ep_index = 0;
    struct Slot {
        Buffers* owner;
        std::size_t i;
    };
    std::vector<Slot> ctx;

    void open(fid_domain* domain, std::uint64_t key)
    {
        ok(fi_mr_reg(domain, memory.data(), memory.size(), FI_SEND | FI_RECV, 0, key, 0, &mr,
                     nullptr),
           "fi_mr_reg");
        for (std::size_t i = 0; i < slots; ++i)
            ctx.push_back({this, i});
    }
    void post(fid_ep* ep, std::size_t i)
    {
        ok(static_cast<int>(fi_recv(ep, memory.data() + i * slot_size, slot_size, fi_mr_desc(mr),
                                    FI_ADDR_UNSPEC, &ctx[i])),
           "fi_recv");
    }
    char* send_buffer() { return memory.data() + slots * slot_size; }
    ~Buffers()
    {
        if (mr)
            fi_close(&mr->fid);
    }
};

struct Raw {
    fi_info* info = nullptr;
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    fid_cq* cq = nullptr;
    fid_eq* eq = nullptr;   // MSG
    fid_pep* pep = nullptr; // MSG hub
    fid_av* av = nullptr;   // RDM
    std::vector<fid_ep*> eps;
    std::vector<std::unique_ptr<Buffers>> bufs;
    std::vector<fi_addr_t> addrs; // RDM: the hub's peers
    std::uint64_t next_key = 1;

    Raw(const Config& c, bool passive, std::span<const std::byte> dest)
    {
        fi_info* hints = fi_allocinfo();
        hints->ep_attr->type = c.kind == EndpointKind::msg ? FI_EP_MSG : FI_EP_RDM;
        hints->caps = c.aggregate ? FI_MSG | FI_RMA : FI_MSG; // weft's Node asks for RMA too
        hints->mode = FI_CONTEXT;
        hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                      FI_MR_PROV_KEY;
        hints->fabric_attr->prov_name = strdup(c.provider.c_str());
        if (!dest.empty()) {
            hints->dest_addr = std::malloc(dest.size());
            std::memcpy(hints->dest_addr, dest.data(), dest.size());
            hints->dest_addrlen = dest.size();
            hints->addr_format = dest.size() == sizeof(sockaddr_in)    ? FI_SOCKADDR_IN
                                 : dest.size() == sizeof(sockaddr_in6) ? FI_SOCKADDR_IN6
                                                                        : FI_ADDR_STR;
        }
        const bool tcp_like = c.provider.rfind("shm", 0) != 0;
        const int r = fi_getinfo(FI_VERSION(1, 17), passive && tcp_like ? "127.0.0.1" : nullptr,
                                 passive && tcp_like ? "0" : nullptr, passive && tcp_like ? FI_SOURCE : 0,
                                 hints, &info);
        fi_freeinfo(hints);
        ok(r, "fi_getinfo");
        ok(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
        ok(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
        fi_cq_attr cqa{};
        cqa.format = FI_CQ_FORMAT_DATA;
        cqa.size = 1024;
        ok(fi_cq_open(domain, &cqa, &cq, nullptr), "fi_cq_open");
        if (c.kind == EndpointKind::msg) {
            fi_eq_attr eqa{};
            ok(fi_eq_open(fabric, &eqa, &eq, nullptr), "fi_eq_open");
            if (passive) {
                ok(fi_passive_ep(fabric, info, &pep, nullptr), "fi_passive_ep");
                ok(fi_pep_bind(pep, &eq->fid, 0), "fi_pep_bind");
                ok(fi_listen(pep), "fi_listen");
            }
        } else {
            fi_av_attr ava{};
            ava.type = FI_AV_TABLE;
            ok(fi_av_open(domain, &ava, &av, nullptr), "fi_av_open");
            add_endpoint(info);
        }
    }
    Raw(const Raw&) = delete;
    Raw& operator=(const Raw&) = delete;
    ~Raw()
    {
        for (auto* ep : eps)
            fi_close(&ep->fid);
        bufs.clear();
        for (fid* f : {pep ? &pep->fid : nullptr, av ? &av->fid : nullptr, &cq->fid,
                       eq ? &eq->fid : nullptr, &domain->fid, &fabric->fid})
            if (f)
                fi_close(f);
        fi_freeinfo(info);
    }

    /// An endpoint bound to the one queue (and event queue / address vector),
    /// with its receives posted; MSG: not yet connected or accepted.
    fid_ep* add_endpoint(fi_info* i)
    {
        fid_ep* ep = nullptr;
        ok(fi_endpoint(domain, i, &ep, nullptr), "fi_endpoint");
        ok(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
        if (eq)
            ok(fi_ep_bind(ep, &eq->fid, 0), "fi_ep_bind(eq)");
        if (av)
            ok(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
        ok(fi_enable(ep), "fi_enable");
        auto& b = bufs.emplace_back(std::make_unique<Buffers>());
        b->ep_index = static_cast<std::uint32_t>(eps.size());
        b->open(domain, next_key++);
        for (std::size_t s = 0; s < slots; ++s)
            b->post(ep, s);
        eps.push_back(ep);
        return ep;
    }

    std::vector<std::byte> name() const
    {
        std::vector<std::byte> out(256);
        std::size_t len = out.size();
        ok(pep ? fi_getname(&pep->fid, out.data(), &len) : fi_getname(&eps.at(0)->fid, out.data(), &len),
           "fi_getname");
        out.resize(len);
        return out;
    }

    /// MSG: takes connection events; returns how many FI_CONNECTED arrived.
    int events()
    {
        int connected = 0;
        for (;;) {
            std::uint32_t type = 0;
            fi_eq_cm_entry e{};
            const ssize_t n = fi_eq_read(eq, &type, &e, sizeof e, 0);
            if (n == -FI_EAGAIN)
                return connected;
            if (n < 0)
                throw std::runtime_error(fmt::format("fi_eq_read: {}", fi_strerror(static_cast<int>(-n))));
            if (type == FI_CONNREQ) {
                fid_ep* ep = add_endpoint(e.info);
                fi_freeinfo(e.info);
                ok(fi_accept(ep, nullptr, 0), "fi_accept");
            } else if (type == FI_CONNECTED) {
                ++connected;
            }
        }
    }

    /// Sends 8 B carrying `value` on endpoint `ep` (to `to` on RDM); waits for nothing.
    void send(std::size_t ep, fi_addr_t to, std::uint64_t value)
    {
        Buffers& b = *bufs.at(ep);
        std::memcpy(b.send_buffer(), &value, 8);
        post([&] { return fi_send(eps.at(ep), b.send_buffer(), 8, fi_mr_desc(b.mr), to, &b); },
             "fi_send");
    }

    /// Calls `call` (an fi_* post) until the provider takes it, progressing
    /// meanwhile; other errors throw.
    template <class Call>
    void post(Call call, const char* what)
    {
        for (;;) {
            const ssize_t r = call();
            if (r == 0)
                return;
            if (r != -FI_EAGAIN)
                ok(static_cast<int>(r), what);
            (void)fi_cq_read(cq, nullptr, 0);
        }
    }

    struct Got {
        std::size_t ep;
        std::uint64_t value;
    };
    /// Reads the queue: received messages (their receives posted again) into
    /// `got`, and returns how many sends (and writes) completed; their
    /// contexts go to `done` when given.
    int poll(std::vector<Got>& got, std::vector<void*>* done = nullptr)
    {
        fi_cq_data_entry e[16];
        const ssize_t n = fi_cq_read(cq, e, 16);
        if (n == -FI_EAGAIN)
            return 0;
        if (n < 0) {
            fi_cq_err_entry err{};
            (void)fi_cq_readerr(cq, &err, 0);
            throw std::runtime_error(fmt::format("fi_cq_read: {}", fi_strerror(err.err)));
        }
        int sent = 0;
        for (ssize_t i = 0; i < n; ++i) {
            if (e[i].flags & FI_RECV) {
                auto* s = static_cast<Buffers::Slot*>(e[i].op_context);
                std::uint64_t v = 0;
                std::memcpy(&v, s->owner->memory.data() + s->i * slot_size, 8);
                got.push_back({s->owner->ep_index, v});
                s->owner->post(eps.at(s->owner->ep_index), s->i);
            } else {
                ++sent;
                if (done)
                    done->push_back(e[i].op_context);
            }
        }
        return sent;
    }
};

Traffic traffic_hub(Raw& hub, std::vector<Child>& children, std::chrono::microseconds read_nap);
void traffic_child(Raw& me, fi_addr_t hub, Channel& channel, std::uint32_t index);

} // namespace weft::peers::raw
