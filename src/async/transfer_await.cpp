// SPDX-License-Identifier: MIT
// co_await transfer.done(deadline): parks on the Transfer's state, which
// readies it when its last completion comes.
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/async/transfer.hpp"
#include "weft/base/error.hpp"

namespace weft::detail {

TransferAwait::~TransferAwait()
{
    if (state_ && state_->waiter == this)
        state_->waiter = nullptr;
    if (linked)
        unpark(*this);
}

bool TransferAwait::await_ready()
{
    if (state_->state == Transfer::State::idle)
        throw UsageError("Transfer::done", -FI_EINVAL, std::string(node_.provider()),
                         "the transfer was never posted: post() it first");
    node_.settle();
    return state_->finished();
}

void TransferAwait::await_suspend(std::coroutine_handle<> h)
{
    state_->waiter = this;
    park(*this, h, PeerId{});
}

void TransferAwait::give_up(Early) noexcept
{
    if (state_ && state_->waiter == this)
        state_->waiter = nullptr;
}

void TransferAwait::await_resume()
{
    unpark(*this);
    if (state_ && state_->waiter == this)
        state_->waiter = nullptr;
    if (!state_)
        throw Error("Transfer::done", -FI_ECANCELED, std::string(node_.provider()),
                    "the Transfer was destroyed while this coroutine awaited it");
    if (!state_->finished())
        throw_early(early, fmt::format("the transfer ({} completions to come)", state_->remaining)
                               .c_str(),
                    PeerId{});
    if (state_->error)
        std::rethrow_exception(state_->error);
}

} // namespace weft::detail
