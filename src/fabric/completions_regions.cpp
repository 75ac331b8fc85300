// SPDX-License-Identifier: MIT
// Completions: the regions posted operations hold, until they complete, and
// the checks a Local passes before it is posted (revoked, another Node's,
// read-only memory as a sink).
#include "weft/fabric/completions.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "weft/fabric/endpoint.hpp"

namespace weft {

void Completions::keep_slow(const MemoryRegion* region, bool sink)
{
    const std::uint32_t revocations = MemoryRegion::revocations();
    if (region) [[likely]]
        check_local(*region, sink);
    (sink ? last_sink_ : last_source_) = region;
    (sink ? sink_revocations_ : source_revocations_) = revocations;
    if (!region)
        return; // a span built by hand: its owner keeps it alive
    for (const auto& h : held_)
        if (h.get() == region)
            return;
    if (in_flight_ <= 0)
        release_idle();
    held_.push_back(region->shared_from_this());
}

namespace {

std::string describe(const Domain& d)
{
    return d.owner().empty() ? fmt::format("a {} domain opened by hand", d.provider()) : d.owner();
}

} // namespace

void Completions::check_local(const MemoryRegion& region, bool sink) const
{
    const char* call = sink ? "read" : "write";
    if (region.revoked())
        throw UsageError(call, -FI_EINVAL, std::string(provider()),
                         fmt::format("the local {} B region (key {:#x}) was revoked after this "
                                     "Local was sliced from it: its registration is closed. "
                                     "Register the memory again and slice the new region; "
                                     "nothing was posted",
                                     region.size(), region.key()));
    if (&region.domain() != cq_->domain().get())
        throw UsageError(call, -FI_EINVAL, std::string(provider()),
                         fmt::format("the Local was sliced from a region registered by {}, "
                                     "and this operation runs on {}: a registration works only "
                                     "with its own Node's peers. Register the buffer on this "
                                     "Node (each of a shm Server's Connections has a Node of its "
                                     "own); nothing was posted",
                                     describe(region.domain()), describe(*cq_->domain())));
    if (sink && region.read_only())
        throw UsageError("read", -FI_EINVAL, std::string(provider()),
                         "the local sink is read-only memory (a read-only mapping made by "
                         "map_file without remote-write access, or memory the process cannot "
                         "write given to register_memory): "
                         "the data cannot land there. Read into a region of writable memory, "
                         "or map the file with Access::remote_read_write; nothing was posted");
}

void Completions::release_idle() noexcept
{
    // Nothing in flight: a region only this queue still holds may go.
    const auto before = held_.size();
    std::erase_if(held_, [](const std::shared_ptr<const MemoryRegion>& h) { return h.use_count() == 1; });
    if (held_.size() != before)
        last_source_ = last_sink_ = nullptr; // a freed address may come back as another region
}

void Completions::release_all() noexcept
{
    held_.clear();
    last_source_ = last_sink_ = nullptr;
}

std::vector<std::shared_ptr<void>> Completions::held() const
{
    std::vector<std::shared_ptr<void>> out;
    for (const auto& h : held_)
        out.push_back(std::const_pointer_cast<MemoryRegion>(h));
    return out;
}

} // namespace weft
