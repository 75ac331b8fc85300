// SPDX-License-Identifier: MIT
// Endpoint connection set-up: MSG connect and accept (blocking, and the
// non-blocking steps a Node drives), and the RDM endpoint, each retried on
// another port where iWARP's rdma_cm picked one a TCP socket holds.
#include "weft/endpoint.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "retry.hpp"
#include "weft/error.hpp"

namespace weft {

std::shared_ptr<Endpoint> Endpoint::connect(std::shared_ptr<Domain> domain, const Info& info,
                                            const Options& options,
                                            std::span<const std::byte> param, Deadline deadline,
                                            std::shared_ptr<Completions> completions)
{
    // On iWARP the port rdma_cm picked for this end may be one a TCP socket
    // holds; the connect then fails here, before any request left (retry.hpp).
    auto ep = detail::retry_on_port_clash(info.get(), [&] {
        auto made = create(domain, options, EndpointKind::msg);
        made->open_fid(info);
        made->bind_and_enable(EventQueue::open(domain->fabric()), completions);
        detail::check(fi_connect(made->ep_, (*made->ep_info_)->dest_addr, param.data(),
                                 param.size()),
                      "fi_connect", made->provider());
        auto ev = made->eq_->wait(deadline, "FI_CONNECTED from the server");
        if (ev.type != FI_CONNECTED)
            detail::throw_error("fi_connect", -FI_ECONNREFUSED, made->provider(),
                                fmt::format("expected FI_CONNECTED, got {}", event_name(ev.type)));
        return made;
    });
    // The initiator sends first: iWARP requires it, and a small non-empty first
    // message is safe everywhere (zrlio/softiwarp#20). With credits, the server
    // answers with its own receive count.
    ep->send_hello();
    if (ep->credits_) {
        ep->awaiting_hello_ = true;
        ep->expect_hello(deadline, true);
    }
    return ep;
}

std::shared_ptr<Endpoint> Endpoint::accept(std::shared_ptr<Domain> domain,
                                           EventQueue::Event request, const Options& options,
                                           Deadline deadline)
{
    auto ep = begin_accept(std::move(domain), std::move(request), options);
    auto ev = ep->eq_->wait(deadline, "FI_CONNECTED after accepting");
    if (ev.type != FI_CONNECTED)
        detail::throw_error("fi_accept", -FI_ECONNABORTED, ep->provider(),
                            fmt::format("expected FI_CONNECTED, got {}", event_name(ev.type)));
    ep->connected_ = true;
    ep->expect_hello(deadline, false);
    if (ep->credits_)
        ep->send_hello();
    return ep;
}

std::shared_ptr<Endpoint> Endpoint::begin_accept(std::shared_ptr<Domain> domain,
                                                 EventQueue::Event request,
                                                 const Options& options,
                                                 std::shared_ptr<Completions> completions)
{
    auto ep = create(domain, options, EndpointKind::msg);
    ep->open_fid(std::move(*request.info));
    ep->awaiting_hello_ = true;
    ep->bind_and_enable(EventQueue::open(domain->fabric()), std::move(completions));
    detail::check(fi_accept(ep->ep_, nullptr, 0), "fi_accept", ep->provider());
    return ep;
}

bool Endpoint::accept_step()
{
    if (ep_ == nullptr)
        closed_error("accept");
    if (!connected_) {
        auto ev = eq_->read("FI_CONNECTED after accepting");
        if (!ev)
            return false;
        if (ev->type != FI_CONNECTED)
            detail::throw_error("fi_accept", -FI_ECONNABORTED, provider(),
                                fmt::format("expected FI_CONNECTED, got {}", event_name(ev->type)));
        connected_ = true;
    }
    if (awaiting_hello_) {
        q_->stash_some();
        if (awaiting_hello_)
            return false;
        if (credits_)
            send_hello();
    }
    return true;
}

std::shared_ptr<Endpoint> Endpoint::open_msg(std::shared_ptr<Domain> domain, Info info,
                                             const Options& options,
                                             std::shared_ptr<EventQueue> eq,
                                             std::shared_ptr<Completions> completions,
                                             PeerId peer)
{
    auto ep = create(domain, options, EndpointKind::msg);
    ep->exchange_ids_ = true;
    ep->peer_ = peer;
    ep->open_fid(std::move(info));
    ep->bind_and_enable(eq, std::move(completions));
    return ep;
}

void Endpoint::begin_connect(std::span<const std::byte> param)
{
    initiator_ = true;
    detail::check(fi_connect(ep_, (*ep_info_)->dest_addr, param.data(), param.size()),
                  "fi_connect", provider());
}

void Endpoint::begin_accept()
{
    awaiting_hello_ = true;
    detail::check(fi_accept(ep_, nullptr, 0), "fi_accept", provider());
}

void Endpoint::connected()
{
    connected_ = true;
    if (initiator_) {
        send_hello(); // the initiator sends first (iWARP requires it)
        awaiting_hello_ = true; // the acceptor's hello carries its id of this side
    }
}

std::shared_ptr<Endpoint> Endpoint::open_rdm(std::shared_ptr<Domain> domain,
                                             const Options& options,
                                             std::shared_ptr<Completions> completions,
                                             bool framed)
{
    // ofi_rxm over iWARP binds its listening rdma_cm port at fi_endpoint (a
    // port TCP does not hold: providers/verbs.cpp), where a clash fails cleanly.
    return detail::retry_on_port_clash(domain->info().get(), [&] {
        auto ep = create(domain, options, EndpointKind::rdm);
        ep->open_fid(domain->info());
        ep->framed_ |= framed;
        ep->bind_and_enable(nullptr, completions);
        return ep;
    });
}

} // namespace weft
