// SPDX-License-Identifier: MIT
// Endpoint set-up: opening, binding, receive slots, and turning completion
// entries into weft::Completion. Connecting and accepting are in
// endpoint_connect.cpp.
#include "weft/fabric/endpoint.hpp"
#include "check.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "traits.hpp"
#include "frame.hpp"
#include "weft/base/error.hpp"
#include "weft/fabric/progress.hpp"

namespace weft {

struct Endpoint::Private {};

Endpoint::Endpoint(Private, std::shared_ptr<Domain> domain, const Options& options,
                   EndpointKind kind)
    : domain_(std::move(domain)), options_(options), kind_(kind), quirks_(domain_->quirks()),
      queue_bypassing_reads_(quirks_.reads_overtake_queued_writes), ep_(domain_)
{
}

Endpoint::~Endpoint()
{
    close_now();
    if (q_)
        q_->detach(tags_);
}

std::shared_ptr<Endpoint> Endpoint::create(std::shared_ptr<Domain> domain, const Options& options,
                                           EndpointKind kind)
{
    return std::make_shared<Endpoint>(Private{}, std::move(domain), options, kind);
}

void Endpoint::close()
{
    if (sharers_ > 1 && !ep_.closed())
        throw UsageError("Endpoint::close", -FI_EBUSY, std::string(provider()),
                         fmt::format("this is a Node's one RDM endpoint, carrying the traffic of "
                                     "{} peers (a Server's connections share it): closing it "
                                     "would end every one of them. End one peer by destroying "
                                     "its Connection (or Node::remove_peer); end them all by "
                                     "destroying the Server or Node",
                                     sharers_));
    close_now();
}

void Endpoint::close_now() noexcept
{
    if (ep_.closed())
        return;
    // The last endpoint of a queue stops its progress thread first: the thread
    // polls the queue this endpoint is bound to. (No queue yet: the set-up
    // failed before the endpoint was bound.)
    const bool last = q_ && q_->attached_ == 1;
    if (ep_.unclosable())
        abandon("ofi_rxm failed to enable it, and libfabric 1.17 crashes when such an endpoint "
                "is closed");
    else if (last && !q_->stop_progress())
        abandon(fmt::format("its progress thread did not return from the provider within {} ms "
                            "(shm spins forever on a lock a killed peer held)",
                            ProgressThread::grace.count()));
    else if (last && providers::is_layered(provider()))
        completions_->queue()->empty_out(); // see CompletionQueue::empty_out
    ep_.close();
    if (last)
        q_->release_all(); // nothing can touch the regions it held now
}

void Endpoint::abandon(const std::string& why) noexcept
{
    // The provider may touch any of these again (a progress thread stuck
    // inside it), or cannot close them: they stay open, reachable from here,
    // for good.
    std::vector<std::shared_ptr<void>> also{completions_, slots_.region(), scratch_.region(),
                                            credits_.region()};
    for (auto& h : q_->held())
        also.push_back(std::move(h));
    ep_.abandon(also);
    detail::log_warning(fmt::format("{} endpoint abandoned: {}; its libfabric objects stay open",
                                    provider(), why));
}

void Endpoint::closed_error(const char* call) const
{
    throw UsageError(call, -FI_EINVAL, std::string(provider()),
                     "the endpoint is closed (Endpoint::close): nothing was posted; open a new "
                     "connection");
}

void Endpoint::open_fid(Info owned)
{
    ep_.open(std::move(owned));
    const fi_info* info = ep_.info();
    const auto* tx = info->tx_attr;
    inject_size_ = tx->inject_size;
    iov_limit_ = std::max<std::size_t>(1, tx->iov_limit);
    rma_iov_limit_ = std::max<std::size_t>(1, tx->rma_iov_limit);
    ordered_saw_ = tx->msg_order & FI_ORDER_SAW;
    ordered_waw_ = tx->msg_order & FI_ORDER_WAW;
    rx_cq_data_ = info->mode & FI_RX_CQ_DATA;
    // Without CQ data (iWARP), notify becomes a message, and messages carry a
    // header so the target can tell the two apart.
    framed_ = info->domain_attr->cq_data_size < sizeof(std::uint32_t);
}

namespace {

/// Receive slots an endpoint posts: Options::rx_slots within what the
/// provider takes, and at least the hello and the nudges under credits.
std::size_t slot_count(const fi_info* info, const Options& options, bool credits)
{
    const std::size_t rx_size = info->rx_attr->size ? info->rx_attr->size : options.rx_slots;
    // The hello and up to max_nudges nudges may arrive before the peer knows
    // our slot count (endpoint_flow.cpp).
    const std::size_t least = credits ? frame::max_nudges + 1 : 1;
    return std::clamp<std::size_t>(options.rx_slots, std::min(least, rx_size), rx_size);
}

bool uses_credits(const Quirks& quirks, EndpointKind kind)
{
    return kind == EndpointKind::msg && quirks.receiver_not_ready_fatal;
}

} // namespace

std::shared_ptr<Completions> Endpoint::completions_for(const std::shared_ptr<Domain>& domain,
                                                       const Options& options,
                                                       std::size_t endpoints)
{
    const fi_info* info = domain->info().get();
    const Quirks& quirks = domain->quirks();
    const std::size_t slots = std::max(slot_count(info, options, true), slot_count(info, options, false));
    // What one endpoint can have complete at once: its transmit queue and the
    // receives weft posts.
    const std::size_t per_endpoint = info->tx_attr->size + slots;
    endpoints = std::max<std::size_t>(1, endpoints);
    std::size_t cq_size = per_endpoint * endpoints;
    // A queue shared by many endpoints holds what is in flight at once; the
    // software providers keep an overflow list past it.
    constexpr std::size_t shared_cap = 65536;
    if (endpoints > 1)
        cq_size = std::min(cq_size, std::max(shared_cap, per_endpoint));
    if (quirks.max_cq_entries) {
        // A device's queue has no overflow list: an overrun breaks every
        // connection on it. Serve only as many endpoints as it can hold.
        cq_size = std::min<std::size_t>(cq_size, quirks.max_cq_entries);
        endpoints = std::clamp<std::size_t>(cq_size / per_endpoint, 1, endpoints);
    }
    return Completions::open(domain, options, cq_size, endpoints, slots);
}

void Endpoint::bind_and_enable(const std::shared_ptr<EventQueue>& eq,
                               std::shared_ptr<Completions> completions)
{
    const fi_info* info = domain_->info().get();
    const bool credits = uses_credits(quirks_, kind_);
    const std::size_t count = slot_count(info, options_, credits);
    completions_ = completions ? std::move(completions) : completions_for(domain_, options_, 1);
    q_ = completions_.get();
    tags_ = q_->attach(this, count);
    q_->credits_ |= credits;
    ep_.bind(q_->queue());
    if (kind_ == EndpointKind::msg) {
        eq_ = eq;
        ep_.bind(eq_);
    } else {
        av_ = AddressVector::open(domain_);
        ep_.bind(av_);
    }
    ep_.enable();
    // Reads of the queue stay out of the provider while a lock its progress
    // takes is held (shm: a peer killed inside it holds it for good).
    if (auto lock = providers::progress_lock(provider(), ep_.get()))
        q_->queue()->guard(std::move(lock));

    if ((info->caps & FI_ATOMIC) && !quirks_.atomics_unreliable) {
        fi_atomic_attr attr{};
        atomics_ = fi_query_atomic(domain_->get(), FI_UINT64, FI_SUM, &attr, FI_FETCH_ATOMIC) == 0 &&
                   fi_query_atomic(domain_->get(), FI_UINT64, FI_CSWAP, &attr,
                                   FI_COMPARE_ATOMIC) == 0;
    }

    // Receive slots: messages and (on FI_RX_CQ_DATA providers) notifications land here.
    const std::size_t slot_size =
        std::max<std::size_t>(options_.slot_size, frame::header_size + frame::hello_size);
    max_message_ = framed_ ? slot_size - frame::header_size : slot_size;
    if (info->ep_attr->max_msg_size)
        max_transfer_ = info->ep_attr->max_msg_size;
    if (credits)
        credits_.open(domain_, this);
    slots_.allocate(domain_, count, slot_size, this);
    // Scratch: frame headers and atomic operands, one entry per transmit slot.
    scratch_.allocate(domain_, std::max<std::size_t>(64, 2 * info->tx_attr->size), this);
    post_slots();
    q_->endpoint_enabled();
}

void Endpoint::post_slots()
{
    for (std::uint32_t i = 0; i < slots_.count(); ++i)
        post_recv(i);
}

void Endpoint::post_recv(std::uint32_t slot)
{
    post<fi_recv>("fi_recv", FI_ADDR_UNSPEC, slots_[slot], slots_.size(), slots_.desc(), FI_ADDR_UNSPEC,
                  &tags_[2 + slot]);
}

void Endpoint::repost(std::uint32_t slot)
{
    if (ep_.closed())
        return;
    post_recv(slot);
    if (credits_.on() && !hello_.awaiting) {
        credits_.reposted(); // a slot the peer may use again; granted in grant_credits()
        need_follow_up();
    }
}

void Endpoint::need_follow_up()
{
    if (!follow_up_queued_) {
        follow_up_queued_ = true;
        q_->follow_ups_.push_back(this);
    }
}

void Endpoint::follow_up()
{
    follow_up_queued_ = false;
    if (ep_.closed())
        return;
    if (hello_.due) {
        hello_.due = false;
        send_hello();
    }
    if (credits_.on())
        grant_credits();
}

std::vector<std::byte> Endpoint::name() const
{
    if (ep_.closed())
        closed_error("name");
    return ep_.name();
}

Peer Endpoint::insert_peer(std::span<const std::byte> peer_name)
{
    if (ep_.closed())
        closed_error("insert_peer");
    if (!av_)
        throw UsageError("insert_peer", -FI_EINVAL, std::string(provider()),
                         "MSG endpoints are connected to one peer: use Peer{} instead");
    return av_->insert(peer_name);
}

bool Endpoint::received(const detail::Tag& tag, const fi_cq_data_entry& e, Completion& c)
{
    const std::uint32_t slot = tag.index;
    std::byte* buf = slots_[slot];
    if (hello_.awaiting) {
        const bool framed_hello = !framed_ || (e.len >= frame::header_size &&
                                               frame::type_of(buf) == frame::type_hello);
        const std::size_t skip = framed_ ? frame::header_size : 0;
        const bool ok = framed_hello && e.len >= skip && accept_hello(buf + skip, e.len - skip);
        repost(slot); // not counted: hello_.awaiting is still set
        if (!ok)
            detail::throw_error("connect", -EPROTO, provider(),
                                "the peer's first message is not weft's hello: is the peer a "
                                "weft program of the same version?");
        hello_.awaiting = false;
        if (hello_.exchange_ids && !hello_.initiator) { // answered after the drain, not inside it
            hello_.due = true;
            need_follow_up();
        }
        return false;
    }
    if (!framed_) {
        // A note (send_note): the marker in the CQ data's lower half, the
        // value in the first 4 bytes, a reserved word, then the payload.
        if ((e.flags & FI_REMOTE_CQ_DATA) && static_cast<std::uint32_t>(e.data) == frame::note_marker &&
            e.len >= frame::header_size) [[unlikely]] {
            c = Completion{nullptr, Op::notify, 0, frame::note_value_of(buf),
                           {buf + frame::header_size, e.len - frame::header_size}, &tag};
            return true;
        }
        c = Completion{nullptr, Op::recv, e.len, 0, {buf, e.len}, &tag};
        return true;
    }
    if (e.len < frame::header_size) {
        repost(slot);
        detail::throw_error("receive", -EPROTO, provider(),
                            fmt::format("a {} B message without weft's {} B header arrived: the "
                                        "peer is not using weft's framing",
                                        e.len, frame::header_size));
    }
    switch (frame::type_of(buf)) {
    case frame::type_notify:
        c = Completion{nullptr, Op::notify, 0, frame::value_of(buf), {}};
        repost(slot);
        return true;
    case frame::type_note:
        c = Completion{nullptr, Op::notify, 0, frame::value_of(buf),
                       {buf + frame::header_size, e.len - frame::header_size}, &tag};
        return true;
    case frame::type_message:
        c = Completion{nullptr, Op::recv, e.len - frame::header_size, 0,
                       {buf + frame::header_size, e.len - frame::header_size}, &tag};
        return true;
    default:
        repost(slot);
        return false;
    }
}

} // namespace weft
