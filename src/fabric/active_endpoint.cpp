// SPDX-License-Identifier: MIT
#include "weft/fabric/active_endpoint.hpp"
#include "check.hpp"

#include <atomic>
#include <mutex>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "traits.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace {
std::atomic<std::size_t> abandoned_count{0};
}

void ActiveEndpoint::open(Info owned)
{
    fi_info* info = info_.emplace(std::move(owned)).get();
    // Completions are selective where the provider's record says it takes
    // FI_COMPLETION as a default op flag (Endpoint::write_batch then asks for
    // one every N writes; the plain calls keep generating them); elsewhere
    // every operation completes, and weft drops the unsignaled ones itself.
    // A provider without a record is tried, and opened again without.
    const auto tx_flags = info->tx_attr->op_flags;
    const auto rx_flags = info->rx_attr->op_flags;
    fid_ep* raw = nullptr;
    detail::check(providers::before_endpoint(provider(), info), "set-up before fi_endpoint",
                  provider());
    int ret = -FI_ENODATA;
    if (providers::selective_completion(provider())) {
        info->tx_attr->op_flags |= FI_COMPLETION;
        info->rx_attr->op_flags |= FI_COMPLETION;
        ret = fi_endpoint(domain_->get(), info, &raw, nullptr);
    }
    selective_ = ret == 0;
    if (!selective_) {
        info->tx_attr->op_flags = tx_flags;
        info->rx_attr->op_flags = rx_flags;
        ret = fi_endpoint(domain_->get(), info, &raw, nullptr);
    }
    detail::check(ret, "fi_endpoint", provider());
    fid_.reset(raw);
}

void ActiveEndpoint::bind(std::shared_ptr<CompletionQueue> cq)
{
    const std::uint64_t flags = FI_TRANSMIT | FI_RECV | (selective_ ? FI_SELECTIVE_COMPLETION : 0);
    detail::check(fi_ep_bind(get(), &cq->get()->fid, flags), "fi_ep_bind(cq)", provider());
    cq_ = std::move(cq);
}

void ActiveEndpoint::bind(std::shared_ptr<EventQueue> eq)
{
    detail::check(fi_ep_bind(get(), &eq->get()->fid, 0), "fi_ep_bind(eq)", provider());
    eq_ = std::move(eq);
}

void ActiveEndpoint::bind(std::shared_ptr<AddressVector> av)
{
    detail::check(fi_ep_bind(get(), &av->get()->fid, 0), "fi_ep_bind(av)", provider());
    av_ = std::move(av);
}

void ActiveEndpoint::enable()
{
    detail::check(providers::before_enable(provider(), get()), "set-up before fi_enable",
                  provider());
    if (const int ret = fi_enable(get()); ret != 0) {
        // It stays open instead (see providers/verbs.cpp: before_endpoint).
        unclosable_ = providers::is_layered(provider());
        detail::check(ret, "fi_enable", provider());
    }
}

void ActiveEndpoint::connect(std::span<const std::byte> param)
{
    detail::check(fi_connect(get(), (*info_)->dest_addr, param.data(), param.size()), "fi_connect",
                  provider());
}

void ActiveEndpoint::accept()
{
    detail::check(fi_accept(get(), nullptr, 0), "fi_accept", provider());
}

std::vector<std::byte> ActiveEndpoint::name() const
{
    std::vector<std::byte> out(256);
    std::size_t len = out.size();
    int ret = fi_getname(&get()->fid, out.data(), &len);
    if (ret == -FI_ETOOSMALL) {
        out.resize(len);
        ret = fi_getname(&get()->fid, out.data(), &len);
    }
    detail::check(ret, "fi_getname", provider());
    out.resize(len);
    return out;
}

void ActiveEndpoint::close() noexcept
{
    fid_.reset();
}

void ActiveEndpoint::abandon(std::span<const std::shared_ptr<void>> also) noexcept
{
    static std::mutex m;
    static auto* graveyard = new std::vector<std::shared_ptr<void>>;
    const std::lock_guard lock(m);
    (void)fid_.release();
    for (std::shared_ptr<void> p : {std::shared_ptr<void>(cq_), std::shared_ptr<void>(av_),
                                    std::shared_ptr<void>(eq_), std::shared_ptr<void>(domain_)})
        if (p)
            graveyard->push_back(std::move(p));
    for (const auto& p : also)
        if (p)
            graveyard->push_back(p);
    if (info_) { // the provider may keep pointers into it
        graveyard->push_back(std::make_shared<Info>(std::move(*info_)));
        info_.reset();
    }
    abandoned_count.fetch_add(1, std::memory_order_relaxed);
}

std::size_t ActiveEndpoint::abandoned() noexcept
{
    return abandoned_count.load(std::memory_order_relaxed);
}

} // namespace weft
