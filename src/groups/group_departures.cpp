// SPDX-License-Identifier: MIT
// A group's departures: which ranks have left (their node key there, their
// live mark gone), the watch a group's waits check them with, and shrink()
// (the survivors, as a group of their own).
#include "weft/groups/group.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "weft/base/error.hpp"

namespace weft {

std::vector<std::uint32_t> Group::departed() const
{
    std::vector<std::uint32_t> all(size_);
    for (std::uint32_t r = 0; r < size_; ++r)
        all[r] = r;
    return departed_of(all);
}

std::vector<std::uint32_t> Group::departed_of(std::span<const std::uint32_t> ranks) const
{
    // The node keys first, then the live marks of the ranks that have one:
    // a rank sets its mark before its node key, so one whose node key was
    // there and whose mark is not has ended. (The other order takes a rank
    // that joins between the two reads for one that left; QUIRKS.md has the
    // run.) Each read is one call for all ranks: one range read on etcd,
    // which two requests per rank from every rank every second swamp.
    std::vector<std::string> nodes;
    std::vector<std::uint32_t> of;
    for (const std::uint32_t r : ranks)
        if (r != rank_) {
            nodes.push_back(fmt::format("{}/node/{}", base_, origin_[r]));
            of.push_back(r);
        }
    const std::vector<bool> joined = store_->contains_each(nodes);
    std::vector<std::string> marks;
    std::vector<std::uint32_t> members;
    for (std::size_t i = 0; i < of.size(); ++i)
        if (joined[i]) {
            marks.push_back(fmt::format("{}/alive/{}", base_, origin_[of[i]]));
            members.push_back(of[i]);
        }
    std::vector<std::uint32_t> gone;
    if (marks.empty())
        return gone;
    const std::vector<bool> live = store_->live_each(marks);
    for (std::size_t i = 0; i < members.size(); ++i)
        if (!live[i])
            gone.push_back(members[i]);
    return gone;
}

Group Group::shrink(Deadline deadline)
{
    // <name>/shrink/<k>/here/<r>: rank r is here; .../members/<r>: the
    // survivors as rank r (the lowest) sees them. A "here" key stays, so a
    // rank once seen here is in every view; one that is neither here nor
    // departed is waited for.
    const std::string round = key("shrink", shrinks_++);
    store_->set(fmt::format("{}/here/{}", round, origin_[rank_]), std::string_view("1"));
    std::vector<std::uint32_t> here;
    for (std::uint32_t r = 0; r < size_; ++r) {
        if (r == rank_) {
            here.push_back(r);
            continue;
        }
        const std::uint32_t of[] = {r};
        try {
            (void)store_->get(fmt::format("{}/here/{}", round, origin_[r]), deadline, watch(of));
            here.push_back(r);
        } catch (const TimeoutError&) {
            throw TimeoutError("Group::shrink", -FI_ETIMEDOUT, "",
                               fmt::format("rank {} of {}: rank {} neither came to the shrink nor "
                                           "left the group in time (every survivor calls shrink)",
                                           rank_, size_, r));
        } catch (const Error& e) {
            if (!e.peer_lost())
                throw; // else it has left: not in the smaller group
        }
    }
    const std::uint32_t lowest = here.front();
    const std::string members_key = fmt::format("{}/members/{}", round, origin_[lowest]);
    std::string text = fmt::format("{}", fmt::join(here, ","));
    if (rank_ == lowest) {
        store_->set(members_key, text);
    } else {
        // The lowest survivor's view is the group's; it dies only to be
        // named by the watch.
        const std::uint32_t of[] = {lowest};
        const auto got = store_->get(members_key, deadline, watch(of));
        text.assign(reinterpret_cast<const char*>(got.data()), got.size());
        here.clear();
        for (std::size_t at = 0; at < text.size();) {
            const std::size_t end = std::min(text.find(',', at), text.size());
            std::uint32_t r = 0;
            std::from_chars(text.data() + at, text.data() + end, r);
            here.push_back(r);
            at = end + 1;
        }
        if (std::ranges::find(here, rank_) == here.end())
            throw Error("Group::shrink", -FI_ECONNRESET, std::string(node_->provider()),
                        fmt::format("rank {} of {}: rank {}, the lowest survivor, took this rank "
                                    "for departed (its live mark in the {} was gone): it is out "
                                    "of the smaller group",
                                    rank_, size_, lowest, store_->describe()),
                        nullptr, true);
    }

    Group g;
    g.served_ = served_;
    g.launch_ = launch_;
    g.store_ = store_;
    g.node_ = node_;
    g.size_ = static_cast<std::uint32_t>(here.size());
    g.name_ = round;
    g.base_ = base_;
    g.choice_ = choice_;
    g.peers_.resize(g.size_);
    for (std::uint32_t n = 0; n < g.size_; ++n) {
        const std::uint32_t old = here[n];
        g.origin_.push_back(origin_[old]);
        if (old == rank_) {
            g.rank_ = n;
            continue;
        }
        g.peers_[n] = peers_[old];
        if (g.rank_of_.size() <= peers_[old].index)
            g.rank_of_.resize(peers_[old].index + 1, g.size_);
        g.rank_of_[peers_[old].index] = n;
    }
    // Every survivor has its new group before traffic starts in it.
    g.meet(g.key("joined"), deadline);
    return g;
}

Store::Watch Group::watch(std::span<const std::uint32_t> of) const
{
    std::vector<std::uint32_t> ranks(of.begin(), of.end());
    return [this, ranks] {
        if (const auto gone = departed_of(ranks); !gone.empty())
            throw Error("Group", -FI_ECONNRESET, std::string(node_->provider()),
                        fmt::format("rank {} of {}: rank(s) {} left the group (the {} says "
                                    "the process ended)",
                                    rank_, size_, fmt::join(gone, ", "), store_->describe()),
                        nullptr, true);
    };
}

Store::Watch Group::watch() const
{
    std::vector<std::uint32_t> others;
    for (std::uint32_t r = 0; r < size_; ++r)
        if (r != rank_)
            others.push_back(r);
    return watch(others);
}

} // namespace weft
