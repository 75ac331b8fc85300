// SPDX-License-Identifier: MIT
#include "lanes.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "check.hpp"
#include "host.hpp"
#include "segment.hpp"
#include "weft/base/error.hpp"
#include "weft/fabric/memory_region.hpp"

namespace weft::detail {
namespace {

// A ring holds the largest message (in records of up to 64 slots) and more,
// and 64 KiB at least.
std::uint32_t ring_slots_for(std::size_t max_message)
{
    using L = lane::RingLayout;
    const std::size_t records = (max_message + L::max_payload - 1) / L::max_payload;
    const std::size_t slots = std::max<std::size_t>(1024, records * L::max_span + 128);
    return std::bit_ceil(static_cast<std::uint32_t>(std::min<std::size_t>(slots, L::max_slots)));
}
constexpr auto control_deadline = std::chrono::seconds(5);

lane::Host host_of(const NodeAddress::SameHost& h)
{
    return lane::Host{h.boot_id, h.net_ns, h.pid_ns, h.pid, h.uid};
}

} // namespace

std::string lane_refusal(const NodeAddress& theirs)
{
    if (!theirs.same_host())
        return "its address has no same-host part (its Node's lane is off, or another host's)";
    return lane::refusal(lane::this_host(), host_of(*theirs.same_host()));
}

Lanes::Lanes(std::uint64_t instance, SameHost mode, std::shared_ptr<Domain> domain,
             Completions& q, int epoll_fd, std::size_t max_message, PeerFor peer_for)
    : instance_(instance), mode_(mode), domain_(std::move(domain)), q_(q), epoll_fd_(epoll_fd),
      max_message_(max_message), peer_for_(std::move(peer_for)),
      listener_(lane::UnixListener::open())
{
    const lane::Host h = lane::this_host();
    address_ = NodeAddress::SameHost{h.boot_id, h.net_ns, h.pid_ns, h.pid, h.uid, listener_.name()};
    if (epoll_fd_ >= 0) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = listener_.fd();
        (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener_.fd(), &ev);
        if (q_.queue()->naps()) {
            timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
            if (!timer_)
                detail::throw_error("timerfd_create", -errno, std::string(domain_->provider()));
            ev.data.fd = timer_.get();
            (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_.get(), &ev);
        }
    }
    domain_->share_allocations(true);
    domain_->watch_regions(this);
    q_.add_side(this);
}

Lanes::~Lanes()
{
    q_.add_side(nullptr);
    domain_->watch_regions(nullptr);
    domain_->share_allocations(false);
}

NodeAddress::SameHost Lanes::address() const { return address_; }

Lanes::Link& Lanes::link(PeerId peer)
{
    if (peer.index >= links_.size())
        links_.resize(peer.index + 1);
    return links_[peer.index];
}

void Lanes::watch_fds(const lane::Pair& pair, bool add) noexcept
{
    if (epoll_fd_ < 0)
        return;
    for (const int fd : {pair.channel_fd(), pair.wake_fd()}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        (void)::epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev);
    }
}

void Lanes::begin(PeerId peer, const NodeAddress& theirs)
{
    Link& l = link(peer);
    if (l.own != nullptr || l.decided)
        return;
    if (std::string no = lane_refusal(theirs); !no.empty()) {
        l.why = std::move(no);
        return;
    }
    const NodeAddress::SameHost& h = *theirs.same_host();
    try {
        auto pair = std::make_unique<lane::Pair>(lane::Pair::start(
            lane::UnixChannel::connect(h.lane, Deadline::after(control_deadline)), instance_,
            static_cast<pid_t>(h.pid), ring_slots_for(max_message_), Deadline::after(control_deadline)));
        offer_all(*pair);
        watch_fds(*pair, true);
        l.own = pair.get();
        l.pairs.push_back(std::move(pair));
    } catch (const Error& e) {
        l.why = fmt::format("its lane refused this side: {}", e.what());
    }
}

bool Lanes::decided(PeerId peer) const
{
    return peer.index < links_.size() && links_[peer.index].decided;
}

lane::Pair* Lanes::sender(PeerId peer, Deadline patience)
{
    Link& l = link(peer);
    if (l.decided)
        return l.sending;
    for (;;) {
        for (auto& p : l.pairs)
            if (p->ready()) {
                l.sending = p.get();
                l.decided = true;
                return l.sending;
            }
        if (l.own == nullptr) // no lane begun: none accepted either (else it would be ready)
            break;
        try {
            if (l.own->finish(Deadline::after(std::chrono::microseconds(200))))
                continue;
        } catch (const Error& e) {
            l.why = fmt::format("its lane broke during the hello: {}", e.what());
            break;
        }
        (void)tend(true); // a crossing connection of the peer's, accepted meanwhile
        if (patience.expired()) {
            l.why = "its lane sent no hello in time (the peer did not call into its Node); "
                    "libfabric carries this side's operations to it";
            break;
        }
    }
    l.decided = true;
    fabric_used(peer);
    return nullptr;
}

void Lanes::fabric_used(PeerId peer)
{
    Link& l = link(peer);
    if (std::exchange(l.fabric_said, true))
        return;
    for (auto& p : l.pairs)
        (void)p->say_fabric(Deadline::after(control_deadline));
}

bool Lanes::queue_quiet() const noexcept
{
    if (q_.in_flight() > 0)
        return false;
    bool any = false;
    for (std::uint32_t i = 0; i < links_.size(); ++i) {
        if (links_[i].gone)
            continue;
        if (!lane_only(PeerId{i}))
            return false;
        any = true;
    }
    return any; // no peer yet: one may come through libfabric
}

void Lanes::before_sleep() noexcept
{
    if (!timer_)
        return;
    // Set anew each time: that also takes back a tick the last sleep left.
    itimerspec t{};
    if (!queue_quiet())
        t.it_value.tv_nsec = 10'000'000;
    (void)::timerfd_settime(timer_.get(), 0, &t, nullptr);
}

bool Lanes::lane_only(PeerId peer) const noexcept
{
    if (peer.index >= links_.size())
        return false;
    const Link& l = links_[peer.index];
    bool ready = false;
    for (const auto& p : l.pairs) {
        if (p->peer_uses_fabric())
            return false;
        ready = ready || p->ready();
    }
    return ready;
}

std::string Lanes::path(PeerId peer) const
{
    if (peer.index >= links_.size())
        return fmt::format("{} (no lane: its address was not seen)", domain_->provider());
    const Link& l = links_[peer.index];
    if (l.sending != nullptr)
        return fmt::format("the same-host lane to pid {} (sealed shared memory where the peer "
                           "allocated it, {})",
                           l.sending->peer().pid,
                           mode_ == SameHost::enforced ? "nothing else: SameHost::enforced"
                           : l.sending->cross_copy_refused().empty()
                               ? std::string("process_vm_* elsewhere")
                               : fmt::format("{} elsewhere: {}", domain_->provider(),
                                             l.sending->cross_copy_refused()));
    if (!l.decided && !l.pairs.empty())
        return "the same-host lane, its hello on its way";
    return fmt::format("{} ({})", domain_->provider(),
                       l.why.empty() ? std::string("no lane: not used yet") : "no lane: " + l.why);
}

bool Lanes::adopt(std::unique_ptr<lane::Pair>& pair)
{
    const PeerId peer = peer_for_(pair->peer_instance());
    if (!peer) // not admitted (yet): no hello, no offers
        return false;
    pair->hello(Deadline::after(control_deadline));
    offer_all(*pair);
    watch_fds(*pair, true);
    Link& l = link(peer);
    if (l.fabric_said)
        (void)pair->say_fabric(Deadline::after(control_deadline));
    l.pairs.push_back(std::move(pair));
    return true;
}

std::vector<std::pair<PeerId, std::string>> Lanes::tend(bool now)
{
    std::vector<std::pair<PeerId, std::string>> gone = std::exchange(broken_, {});
    const auto t = Clock::now();
    if (!now && t < next_tend_)
        return gone;
    next_tend_ = t + std::chrono::microseconds(100);
    while (auto ch = listener_.accept()) {
        try {
            // This side's hello waits until the peer's says who it is, and
            // the Node takes it (a gate may not, or not yet).
            unmatched_.push_back(
                {std::make_unique<lane::Pair>(lane::Pair::start(
                     std::move(*ch), instance_, 0, ring_slots_for(max_message_),
                     Deadline::after(control_deadline), false)),
                 t + control_deadline});
        } catch (const Error&) {
            // A connection that went at once: nothing to keep.
        }
    }
    for (std::size_t i = 0; i < unmatched_.size();) {
        auto& [pair, hello_by] = unmatched_[i];
        bool done = false;
        try {
            done = pair->finish(Deadline::after(std::chrono::nanoseconds(0))) && adopt(pair);
            if (!done && pair->ready()) {
                pollfd pfd{pair->channel_fd(), POLLRDHUP, 0};
                done = ::poll(&pfd, 1, 0) > 0; // not taken, and gone: forget it
            } else if (!done) {
                // A weft peer sends its hello as it connects: a connection
                // silent this long is a stranger's, or a stuck one's.
                done = t > hello_by;
            }
        } catch (const Error&) {
            done = true;
        }
        if (done)
            unmatched_.erase(unmatched_.begin() + static_cast<std::ptrdiff_t>(i));
        else
            ++i;
    }
    // The channels: hellos, offers and withdrawals to read, and ends.
    for (std::uint32_t i = 0; i < links_.size(); ++i) {
        for (auto& p : links_[i].pairs) {
            pollfd pfd{p->channel_fd(), POLLIN, 0};
            if (::poll(&pfd, 1, 0) <= 0)
                continue;
            try {
                p->tend();
            } catch (const Error& e) {
                gone.emplace_back(PeerId{i}, fmt::format("its same-host lane closed: {}",
                                                         e.what()));
                break;
            }
        }
    }
    return gone;
}

void Lanes::forget(PeerId peer) noexcept
{
    if (peer.index >= links_.size())
        return;
    Link& l = links_[peer.index];
    // What the peer sent before it went is delivered, as a provider delivers
    // what reached the queue: its inbox is read out before it closes.
    try {
        for (auto& p : l.pairs)
            for (Completion c; p->waiting() && take(*p, peer, c);)
                leftover_.push_back(c);
    } catch (const std::exception&) { // no buffer for it: what is left goes with the pair
    }
    for (auto& p : l.pairs)
        watch_fds(*p, false);
    l.pairs.clear();
    l.own = l.sending = nullptr;
    l.decided = true;
    l.gone = true;
    if (l.why.empty())
        l.why = "the peer was removed or lost";
}

void Lanes::offer(lane::Pair& pair, const MemoryRegion& r)
{
    if (mode_ == SameHost::enforced && r.segment() == nullptr)
        return; // process_vm_* is excluded: only sealed memory is offered
    const Access a = r.access();
    const lane::Offer o{r.key(), reinterpret_cast<std::uintptr_t>(r.data()), r.size(),
                        a == Access::remote_read || a == Access::remote_read_write,
                        a == Access::remote_write || a == Access::remote_read_write};
    pair.offer(o, r.segment(), Deadline::after(control_deadline));
}

void Lanes::offer_all(lane::Pair& pair)
{
    for (const auto& [key, r] : regions_)
        offer(pair, *r);
    pair.offered(Deadline::after(control_deadline));
}

void Lanes::registered(MemoryRegion& region)
{
    regions_[region.key()] = &region;
    for (Link& l : links_)
        for (auto& p : l.pairs)
            try {
                offer(*p, region);
            } catch (const Error&) {
                // A peer gone: tend() says so.
            }
}

void Lanes::revoking(MemoryRegion& region, bool destroying) noexcept
{
    if (regions_.erase(region.key()) == 0)
        return;
    const auto withdraw = [&](lane::Pair& p) {
        try {
            p.withdraw(region.key(), Deadline::after(control_deadline));
        } catch (const Error&) {
        }
    };
    for (Link& l : links_)
        for (auto& p : l.pairs)
            withdraw(*p);
    // A region that stays (revoke()) is cut off from every mapping of it. A
    // memfd other registrations share (registered on other Nodes, or this
    // one another's) is withdrawn only: moving its bytes would cut off the
    // other registrations' peers too, whose registrations stand.
    if (!destroying && region.segment() != nullptr && !region.segment_borrowed() &&
        !region.segment_shared()) {
        try {
            region.segment()->detach_peers();
        } catch (const Error&) {
            // Out of memory for the copy: the peers' mappings stay; their
            // next access fails on the withdrawal all the same.
        }
    }
}

} // namespace weft::detail
