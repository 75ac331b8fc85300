// SPDX-License-Identifier: MIT
// Endpoint connection set-up: MSG connect and accept (blocking, and the
// non-blocking steps a Node drives), and the RDM endpoint, each retried on
// another port where iWARP's rdma_cm picked one a TCP socket holds.
#include "weft/fabric/endpoint.hpp"
#include "check.hpp"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "retry.hpp"
#include "weft/base/error.hpp"

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
        made->ep_.connect(param);
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
    if (ep->credits_.on()) {
        ep->hello_.awaiting = true;
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
    ep->hello_.connected = true;
    ep->expect_hello(deadline, false);
    if (ep->credits_.on())
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
    ep->hello_.awaiting = true;
    ep->bind_and_enable(EventQueue::open(domain->fabric()), std::move(completions));
    ep->ep_.accept();
    return ep;
}

bool Endpoint::accept_step()
{
    if (ep_.closed())
        closed_error("accept");
    if (!hello_.connected) {
        auto ev = eq_->read("FI_CONNECTED after accepting");
        if (!ev)
            return false;
        if (ev->type != FI_CONNECTED)
            detail::throw_error("fi_accept", -FI_ECONNABORTED, provider(),
                                fmt::format("expected FI_CONNECTED, got {}", event_name(ev->type)));
        hello_.connected = true;
    }
    if (hello_.awaiting) {
        q_->stash_some();
        if (hello_.awaiting)
            return false;
        if (credits_.on())
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
    ep->hello_.exchange_ids = true;
    ep->peer_ = peer;
    ep->open_fid(std::move(info));
    ep->bind_and_enable(eq, std::move(completions));
    return ep;
}

void Endpoint::begin_connect(std::span<const std::byte> param)
{
    hello_.initiator = true;
    ep_.connect(param);
}

void Endpoint::begin_accept()
{
    hello_.awaiting = true;
    ep_.accept();
}

void Endpoint::connected()
{
    hello_.connected = true;
    hello_.since = std::chrono::steady_clock::now();
    if (hello_.initiator) {
        send_hello(); // the initiator sends first (iWARP requires it)
        hello_.awaiting = true; // the acceptor's hello carries its id of this side
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
