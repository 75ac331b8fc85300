// SPDX-License-Identifier: MIT
// Opening a Node (weft/peers/node.hpp): its fabric, domain and queue, the
// endpoint (RDM) or listener (MSG), the descriptor a sleeping Node waits on,
// and the same-host lane. Closing it.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

#include <cerrno>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "check.hpp"
#include "getinfo.hpp"
#include "lanes.hpp"
#include "random.hpp"
#include "weft/base/error.hpp"
#include "weft/peers/node.hpp"

namespace weft {
namespace {

std::uint64_t random_instance() { return detail::random_u64("a Node's instance"); }

} // namespace

struct Node::Private {};

Node::Node(Private, std::shared_ptr<const Selection> selection, std::uint64_t instance)
    : selection_(std::move(selection)), instance_(instance)
{
}

Node::~Node()
{
    lanes_.reset(); // its pairs and the watch on the domain's regions first
    // Endpoints before the queue they are bound to (members go in reverse order).
    peers_.clear();
    rdm_.reset();
    listener_.reset();
}

std::shared_ptr<Node> Node::open(const Options& options)
{
    return open(std::make_shared<const Selection>(select(options)));
}

std::shared_ptr<Node> Node::open(std::shared_ptr<const Selection> selection)
{
    auto node = std::make_shared<Node>(Private{}, selection, random_instance());
    const Info& info = selection->info();
    node->fabric_ = Fabric::open(info);
    node->domain_ = Domain::open(node->fabric_, info);
    node->domain_->set_owner(fmt::format("Node {:#018x} ({} {})", node->instance_,
                                         selection->provider(), to_string(selection->kind())));
    const bool msg = selection->kind() == EndpointKind::msg;
    // MSG: one queue for up to 1024 connections; RDM: one endpoint.
    node->completions_ = Endpoint::completions_for(node->domain_, selection->options(), msg ? 1024 : 1);
    node->q_ = node->completions_.get();
    std::vector<std::byte> name;
    const bool sleeping = selection->options().waiting == Waiting::sleep;
    if (msg) {
        node->eq_ = EventQueue::open(node->fabric_, sleeping);
        node->listener_ = Listener::open(node->fabric_, info, node->eq_);
        name = node->listener_->name();
        node->q_->notify_carries_peer();
    } else {
        // Where the provider misnames notifications' sources and the CQ data
        // has no bits to spare (ofi_rxm over verbs: 4 B), a notification is a
        // write and a framed message, whose source the provider names right.
        const Quirks& q = node->domain_->quirks();
        const bool framed = q.notify_source_unreliable && !q.message_source_unreliable &&
                            info->domain_attr->cq_data_size < sizeof(std::uint64_t);
        node->rdm_ = Endpoint::open_rdm(node->domain_, selection->options(), node->completions_,
                                        framed);
        node->rdm_->set_gone_check(&Node::gone_check, node.get());
        name = node->rdm_->name();
        if (!(node->rdm_->info()->caps & FI_SOURCE))
            throw Error("Node::open", -FI_ENOSYS, std::string(selection->provider()),
                        fmt::format("{} does not name the source of what arrives (FI_SOURCE): "
                                    "a Node on it could not tell its peers apart; choose another "
                                    "provider or MSG endpoints",
                                    selection->provider()));
        node->q_->name_sources();
        const Quirks& quirks = node->domain_->quirks();
        if (!node->rdm_->notify_needs_receive() &&
            (quirks.notify_source_unreliable || quirks.message_source_unreliable)) {
            node->q_->senders_tagged(quirks.message_source_unreliable);
            node->rdm_->tag_sender(static_cast<std::uint32_t>(node->instance_),
                                   quirks.message_source_unreliable);
        }
    }
    node->q_->on_idle([](void* n) { static_cast<Node*>(n)->idle(); }, node.get());
    node->address_.emplace(selection->kind(), std::string(selection->provider()),
                           info->addr_format, node->instance_, std::move(name));
    if (sleeping) {
        // One descriptor for the application: the queue's and the event queue's.
        node->epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
        if (!node->epoll_fd_)
            detail::throw_error("epoll_create1", -errno, std::string(selection->provider()));
        // And the dispatcher's poke: a stop token fired on another thread wakes a sleeper.
        node->wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!node->wake_fd_)
            detail::throw_error("eventfd", -errno, std::string(selection->provider()));
        node->dispatcher_.wake_fd = node->wake_fd_.get();
        for (const int fd : {node->q_->fd(), node->eq_ ? node->eq_->fd() : -1, node->wake_fd_.get()}) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.fd = fd;
            if (fd >= 0 && ::epoll_ctl(node->epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
                detail::throw_error("epoll_ctl", -errno, std::string(selection->provider()));
        }
        node->q_->on_sleep([](void* n, int ms) {
            auto* self = static_cast<Node*>(n);
            if (self->trywait())
                self->sleep(Deadline::after(std::chrono::milliseconds(ms)));
        }, node.get());
    }
    if (const SameHost mode = selection->options().same_host;
        mode == SameHost::lane || mode == SameHost::enforced) {
        if (mode == SameHost::enforced)
            (void)::prctl(PR_SET_DUMPABLE, 0); // closes process_vm_* and /proc/<pid>/mem
        node->lanes_ = std::make_unique<detail::Lanes>(
            node->instance_, mode, node->domain_, *node->q_,
            node->epoll_fd_ ? node->epoll_fd_.get() : -1, selection->options().slot_size,
            [n = node.get()](std::uint64_t instance) { return n->lane_peer(instance); });
        node->address_.emplace(selection->kind(), std::string(selection->provider()),
                               info->addr_format, node->instance_,
                               std::vector<std::byte>(node->address_->fabric_address().begin(),
                                                      node->address_->fabric_address().end()),
                               node->lanes_->address());
    }
    return node;
}

std::shared_ptr<Node> Node::open_like(const Options& options, const NodeAddress& peer)
{
    Options o = options;
    o.provider = peer.provider();
    o.kind = peer.kind();
    // The peer named the provider, not the application: the lane stays
    // automatic (on, unless the environment decides).
    if (o.same_host == SameHost::automatic && options.provider.empty() &&
        detail::env("WEFT_PROVIDER").empty() && detail::env("WEFT_SAME_HOST").empty())
        o.same_host = SameHost::lane;
    return open(o);
}

} // namespace weft
