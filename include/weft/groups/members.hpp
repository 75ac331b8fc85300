// SPDX-License-Identifier: MIT
/// @brief The members of a service that come and go, as peers of one Node: the
/// dynamic counterpart of Group, on etcd.
///
///     auto store = std::make_shared<weft::EtcdStore>("10.0.0.1:2379", deadline, "kv/");
///     auto node = weft::Node::open();
///     weft::Members members(store, node, "members/", "server", deadline);
///     while (auto change = members.next(weft::Deadline::after(10ms)))
///         change->peer: a peer of `node` already (joined), or removed from it (left)
///
/// Each member puts its Node's address under `prefix` + its name, under the
/// store's lease: the others see it leave when its Members ends (the key is
/// erased), and within the lease's TTL when its process dies. One watch of the
/// prefix tells every member about every other, in etcd's order, none missed:
/// a member that joined is added to the Node (RDM: an address-vector entry;
/// MSG: connected on first use), one that left is removed from it. A name put
/// again with another Node's address (a member restarted) is a leave, then a
/// join. A key there that is no weft Node address of this Node's provider is
/// reported as refused, with why, and changes nothing.
///
/// What a member sends before this member has seen it join (next()) cannot
/// be named (RDM: its source is not in the address vector yet): let a member
/// write only once told it was seen (the service publishes its inbox then,
/// in examples/05_service).
///
/// A member's Node should be its own: two names with one Node's address are
/// one peer, and the leave of either removes it.
///
/// Every key under the prefix is taken as a member: who may write there is
/// etcd's to decide (its authentication), as for Group the store is the trust
/// anchor. Threading: as the Node's (one thread at a time).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/fabric/completions.hpp"
#include "weft/base/deadline.hpp"
#include "weft/stores/etcd_store.hpp"
#include "weft/peers/node.hpp"

namespace weft {

class Members {
public:
    /// One change of the membership, already applied to the Node.
    struct Change {
        enum class Kind : std::uint8_t {
            joined,  ///< `peer` is a peer of the Node now
            left,    ///< `peer` was removed from the Node (its key went); none and `why`
                     ///< when the key that went is this member's own
            refused, ///< the key's value is not a Node address this Node can use: `why`
        };
        Kind kind = Kind::joined;
        std::string name;
        PeerId peer; ///< none for refused
        std::string why;
    };

    /// Joins as `name` (its Node's address under `prefix` + `name`, under
    /// `store`'s lease) and watches the others: every member there now comes
    /// first from next(), as joined. UsageError when `name` is already there
    /// (another member of that name is alive: the key is created only where
    /// none is, in one transaction); Error when etcd does not take the watch
    /// by `deadline`.
    Members(std::shared_ptr<EtcdStore> store, std::shared_ptr<Node> node, std::string prefix,
            std::string name, Deadline deadline);
    /// Leaves (leave()), noexcept: etcd unreachable, the key goes with the lease.
    ~Members();
    Members(const Members&) = delete;
    Members& operator=(const Members&) = delete;

    /// The next change, or none by `deadline`. A member that left stays named
    /// (name_of) until the next call, so that completions it caused that are
    /// still queued (they name its PeerId) can be taken and named first.
    /// Error once etcd's watch has broken, naming why.
    std::optional<Change> next(Deadline deadline);
    /// The member called `name`, once it has joined (changes met meanwhile
    /// wait for next()); TimeoutError naming it at `deadline`.
    PeerId wait_for(std::string_view name, Deadline deadline);

    /// The member's name for a peer of the Node, or null when it is none.
    const std::string* name_of(PeerId peer) const;
    /// A member there now, as far as next() has told.
    std::optional<PeerId> find(std::string_view name) const;
    /// How many members next() has told of (this one not counted).
    std::size_t size() const noexcept { return by_name_.size(); }

    /// Erases this member's key now (only while it is this member's: a
    /// successor of the same name keeps its own): the others see it leave.
    void leave();

    const std::string& name() const noexcept { return name_; }
    Node& node() const noexcept { return *node_; }

private:
    /// Reads one event from the watch and queues its change (none by `deadline`).
    bool read_one(Deadline deadline);
    void apply_put(const std::string& name, const std::vector<std::byte>& value);
    void apply_erase(const std::string& name);
    void forget_departed();

    struct Member {
        PeerId peer;
        std::vector<std::byte> address; // as put: a put of the same value changes nothing
    };
    std::shared_ptr<EtcdStore> store_;
    std::shared_ptr<Node> node_;
    std::string prefix_;
    std::string name_;
    bool joined_ = false;
    EtcdWatch watch_;
    std::map<std::string, Member, std::less<>> by_name_;
    std::map<std::uint32_t, std::string> names_;      // PeerId index -> name, departed ones too
    std::vector<std::uint32_t> departed_;             // named until the next call of next()
    std::deque<Change> pending_;                      // met by wait_for(), not yet told
};

std::string_view to_string(Members::Change::Kind kind) noexcept;

} // namespace weft
