// SPDX-License-Identifier: MIT
#include "weft/groups/members.hpp"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/peers/node_address.hpp"

namespace weft {

std::string_view to_string(Members::Change::Kind kind) noexcept
{
    switch (kind) {
    case Members::Change::Kind::joined:
        return "joined";
    case Members::Change::Kind::left:
        return "left";
    case Members::Change::Kind::refused:
        return "refused";
    }
    return "?";
}

Members::Members(std::shared_ptr<EtcdStore> store, std::shared_ptr<Node> node, std::string prefix,
                 std::string name, Deadline deadline)
    : store_(std::move(store))
    , node_(std::move(node))
    , prefix_(std::move(prefix))
    , name_(std::move(name))
    , watch_(store_->watch(prefix_, deadline))
{
    if (name_.empty())
        throw UsageError("Members", -FI_EINVAL, std::string(node_->provider()),
                         "a member needs a name (its key is the prefix and the name)");
    const std::string key = prefix_ + name_;
    if (!store_->create_while_alive(key, node_->address().encode()))
        throw UsageError("Members", -FI_EINVAL, std::string(node_->provider()),
                         fmt::format("a member called \"{}\" is already there ({} in {}): pick "
                                     "another name, or wait for its lease to expire",
                                     name_, key, store_->describe()));
    joined_ = true;
}

Members::~Members()
{
    try {
        leave();
    } catch (...) {
        // etcd unreachable: the key goes with the lease (the store's end, or its TTL)
    }
}

void Members::leave()
{
    if (std::exchange(joined_, false))
        (void)store_->erase_if_mine(prefix_ + name_); // not a successor's of the same name
}

std::optional<Members::Change> Members::next(Deadline deadline)
{
    forget_departed();
    if (pending_.empty() && !read_one(deadline))
        return std::nullopt;
    Change c = std::move(pending_.front());
    pending_.pop_front();
    if (c.kind == Change::Kind::left)
        departed_.push_back(c.peer.index);
    return c;
}

PeerId Members::wait_for(std::string_view name, Deadline deadline)
{
    for (;;) {
        if (const auto peer = find(name))
            return *peer;
        if (!read_one(deadline) && deadline.expired())
            throw TimeoutError("Members::wait_for", -FI_ETIMEDOUT, std::string(node_->provider()),
                               fmt::format("no member called \"{}\" joined under {} of {} before "
                                           "the deadline ({} there: is it running, with the "
                                           "same store and prefix?)",
                                           name, prefix_, store_->describe(), by_name_.size()));
    }
}

const std::string* Members::name_of(PeerId peer) const
{
    const auto it = names_.find(peer.index);
    return it == names_.end() ? nullptr : &it->second;
}

std::optional<PeerId> Members::find(std::string_view name) const
{
    const auto it = by_name_.find(name);
    if (it == by_name_.end())
        return std::nullopt;
    return it->second.peer;
}

bool Members::read_one(Deadline deadline)
{
    const std::size_t before = pending_.size();
    while (pending_.size() == before) {
        std::optional<EtcdEvent> e = watch_.next(deadline);
        if (!e)
            return false;
        const std::string name = e->key.substr(prefix_.size());
        if (name == name_) { // this member's own key: it went without leave()
            if (e->kind == EtcdEvent::Kind::erase && joined_) {
                joined_ = false;
                pending_.push_back(Change{Change::Kind::left, name_, PeerId{},
                                          "this member's own key went (its lease expired, or "
                                          "another erased it): the others see it as gone"});
            }
            continue;
        }
        if (e->kind == EtcdEvent::Kind::put)
            apply_put(name, e->value);
        else
            apply_erase(name);
    }
    return true;
}

void Members::apply_put(const std::string& name, const std::vector<std::byte>& value)
{
    if (const auto it = by_name_.find(name); it != by_name_.end()) {
        if (it->second.address == value)
            return; // put again as it was: nothing changed
        apply_erase(name); // the name is another Node's now: a member restarted
    }
    Change c{Change::Kind::refused, name, PeerId{}, {}};
    try {
        c.peer = node_->add_peer(NodeAddress::decode(value));
        c.kind = Change::Kind::joined;
        by_name_[name] = Member{c.peer, value};
        names_[c.peer.index] = name;
    } catch (const UsageError& e) { // no Node address, or another provider's: the value's fault
        c.why = fmt::format("the value of {}{} is no Node address this Node can use: {}", prefix_,
                            name, e.what());
    }
    pending_.push_back(std::move(c));
}

void Members::apply_erase(const std::string& name)
{
    const auto it = by_name_.find(name);
    if (it == by_name_.end())
        return; // a refused key went, or one this member never saw
    const PeerId peer = it->second.peer;
    node_->remove_peer(peer);
    by_name_.erase(it);
    pending_.push_back(Change{Change::Kind::left, name, peer, {}});
}

void Members::forget_departed()
{
    for (const std::uint32_t index : std::exchange(departed_, {}))
        names_.erase(index);
}

} // namespace weft
