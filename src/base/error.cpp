// SPDX-License-Identifier: MIT
#include "weft/base/error.hpp"
#include "check.hpp"
#include "weft/base/detail/fid.hpp"

#include <atomic>
#include <cstdio>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

namespace weft {

Error::Error(std::string call, int code, std::string provider, const std::string& message,
             void* context, bool peer_lost)
    : std::runtime_error(message), call_(std::move(call)), code_(code),
      provider_(std::move(provider)), context_(context), peer_lost_(peer_lost)
{
}

namespace detail {

namespace {
std::atomic<HintSource> hint_source{nullptr};
} // namespace

void set_hint_source(HintSource source) noexcept { hint_source.store(source); }

std::string format_failure(std::string_view call, int code, std::string_view provider,
                           std::string_view hint)
{
    std::string out = fmt::format("{} failed", call);
    if (!provider.empty())
        out += fmt::format(" on {}", provider);
    if (code != 0)
        out += fmt::format(": {} ({})", fi_strerror(-code), code);
    std::string extra = std::string(hint);
    const HintSource source = hint_source.load();
    if (const auto ph = source ? source(provider, code) : std::string(); !ph.empty())
        extra += fmt::format("{}{}", extra.empty() ? "" : ". ", ph);
    if (!extra.empty())
        out += fmt::format(". {}", extra);
    return out;
}

void throw_error(std::string_view call, int code, std::string_view provider,
                 std::string_view hint)
{
    auto message = format_failure(call, code, provider, hint);
    if (code == -FI_ETIMEDOUT)
        throw TimeoutError(std::string(call), code, std::string(provider), message);
    throw Error(std::string(call), code, std::string(provider), message);
}

void log_warning(std::string_view message) noexcept
{
    std::fprintf(stderr, "weft: warning: %.*s\n", static_cast<int>(message.size()),
                 message.data());
}

namespace {
std::atomic<std::size_t> open_fids{0};
} // namespace

void count_opened_fid() noexcept { open_fids.fetch_add(1, std::memory_order_relaxed); }
std::size_t live_fids() noexcept { return open_fids.load(std::memory_order_relaxed); }

void close_fid(fid_t fid) noexcept
{
    open_fids.fetch_sub(1, std::memory_order_relaxed);
    const int ret = fi_close(fid);
    if (ret != 0) {
        const char* cls = fi_tostr(&fid->fclass, FI_TYPE_FID);
        try {
            log_warning(fmt::format("fi_close({}) failed: {} ({})", cls ? cls : "fid",
                                    fi_strerror(-ret), ret));
        } catch (...) {
        }
    }
}

} // namespace detail
} // namespace weft
