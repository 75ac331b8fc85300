// SPDX-License-Identifier: MIT
/// @brief A Transfer: a list of blocks to one or many peers of a Node, all
/// writes or all reads, prepared once and posted many times, optionally
/// completed at each target by one notification that means every byte of it
/// landed there.
///
///     auto t = weft::Transfer::prepare(node, weft::Direction::write, entries,
///                                      weft::Notify{.enabled = true, .value = round});
///     t.post();                                    // allocates nothing, never blocks
///     co_await t.done(weft::Deadline::after(1s));  // or t.wait(deadline), or t.status()
///     // at each target: co_await node.notification(writer, deadline), once per post
///
/// prepare() checks every entry (the peer, the remote range and its access,
/// the local region) and reserves a context for each; post() then only posts.
/// The writer's "done" means every entry completed here (the buffers are the
/// caller's again); the target's notification means its bytes are in its
/// memory. The notification rides on the target's last write where the
/// provider orders writes and delivers notifications behind them
/// (msg_order, Quirks); elsewhere, or with a payload the provider cannot order,
/// it is sent once that target's writes completed with delivery completion.
/// A failed entry fails the transfer (status() names the first), and a lost
/// peer fails its entries at once; the other peers' entries complete.
///
/// Threading: the Node's (one thread at a time). A Transfer must not outlive
/// its Node (it holds it); destroyed while in flight, its operations are
/// abandoned and reaped as they complete.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "weft/async/task.hpp"
#include "weft/peers/node.hpp"

namespace weft {

/// One block: `local` to (write) or from (read) `remote` at `offset`, at `peer`.
struct TransferEntry {
    PeerId peer;
    Local local;
    RemoteRegion remote;
    std::uint64_t offset = 0;
};

enum class Direction : std::uint8_t { write, read };

/// How a write Transfer tells each target that all of its bytes landed.
struct Notify {
    bool enabled = false;
    /// Completion::data of the target's notification (set_value() changes it).
    std::uint32_t value = 0;
    /// Bytes set_payload() may carry with it (Completion::message at the
    /// target), at most the receive slot size less 8. 0: none.
    std::size_t payload_capacity = 0;
    enum class When : std::uint8_t {
        automatic,        ///< on the last write where the provider orders it, else after
        after_completion, ///< always once the target's writes completed (delivery complete)
    };
    When when = When::automatic;
};

namespace detail {
class TransferState;
class TransferAwait;
} // namespace detail

class Transfer {
public:
    /// Checks and reserves everything; UsageError naming the entry that
    /// cannot work (a peer that is not the Node's, a range out of bounds or
    /// without the access, an empty or revoked local range, a notification on reads).
    static Transfer prepare(std::shared_ptr<Node> node, Direction direction,
                            std::span<const TransferEntry> entries, Notify notify = {});
    Transfer(Transfer&&) noexcept;
    Transfer& operator=(Transfer&&) noexcept;
    ~Transfer();

    /// Posts every entry (and the notifications). UsageError while in flight.
    /// A post that fails (a peer lost since prepare) fails its entry, not the call.
    void post();

    enum class State : std::uint8_t { idle, in_flight, done, failed };
    struct Status {
        State state;
        std::size_t remaining;       ///< completions still to come
        std::size_t failed_entry;    ///< the first entry that failed, or npos
        std::exception_ptr error;    ///< its error
        static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    };
    /// Never blocks (reads nothing: dispatch() or a wait does).
    Status status() const noexcept;
    /// Dispatches until it completed; rethrows the first failure; TimeoutError
    /// at the deadline (it still flies: wait again, or Node::drained()).
    void wait(Deadline deadline);
    /// co_await t.done(deadline): the same, suspended. A stop token ends the wait.
    detail::TransferAwait done(Deadline deadline, std::stop_token stop = {});

    /// The notification's value and payload for the next post (not while in flight).
    void set_value(std::uint32_t value);
    void set_payload(std::span<const std::byte> payload);

    std::size_t size() const noexcept;
    /// The peers it reaches, each once, in the order of their first entry.
    std::span<const PeerId> targets() const noexcept;
    /// Whether the notification to targets()[i] rides on its last write.
    bool piggybacked(std::size_t target) const noexcept;
    Node& node() const noexcept;

private:
    explicit Transfer(std::unique_ptr<detail::TransferState> state) noexcept;
    std::unique_ptr<detail::TransferState> state_;
};

/// Where a target wants a transfer's blocks: a region and the offset of each
/// block in it, all `block` bytes long (NIXL's descriptor list). The target
/// publishes it (publish(), or any channel: encode()); the writer builds its
/// Transfer from it (Transfer::prepare with entries(peer, locals)).
struct Descriptor {
    RemoteRegion region;
    std::uint64_t block = 0;
    std::vector<std::uint64_t> offsets;

    std::vector<std::byte> encode() const;
    /// UsageError for bytes that are not an encoded Descriptor.
    static Descriptor decode(std::span<const std::byte> bytes);
    /// The entries writing `blocks[i]` (each `block` bytes) to offsets[i] at `peer`.
    std::vector<TransferEntry> entries(PeerId peer, std::span<const Local> blocks) const;
};

/// Sends `d` to `peer` as one message (from a buffer registered for it here).
Task<> publish(Node& node, PeerId peer, const Descriptor& d, Deadline deadline);
/// The next message from `peer`, decoded as a Descriptor (UsageError if it is none).
Task<Descriptor> receive_descriptor(Node& node, PeerId peer, Deadline deadline);

} // namespace weft

#include "weft/async/detail/transfer_state.hpp"
