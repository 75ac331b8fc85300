// SPDX-License-Identifier: MIT
#include "weft/fabric/domain.hpp"
#include "check.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <mutex>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "traits.hpp"
#include "random.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace {

// Registration pins pages on RDMA devices; a low soft RLIMIT_MEMLOCK is the most
// common cause of failed registrations (UCX PR#2712). Raise the soft limit to
// the hard limit once per process; never lower anything.
void raise_memlock_once()
{
    static std::once_flag once;
    std::call_once(once, [] {
        rlimit lim{};
        if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
            lim.rlim_cur = lim.rlim_max;
            (void)setrlimit(RLIMIT_MEMLOCK, &lim);
        }
    });
}

std::uint64_t random_key() { return detail::random_u64("a memory key"); }

} // namespace

struct Domain::Private {};

Domain::Domain(Private, std::shared_ptr<Fabric> fabric, Info info, detail::FidPtr<fid_domain> fid)
    : fabric_(std::move(fabric)), info_(std::move(info)),
      quirks_(providers::quirks_for(info_.get())), fid_(std::move(fid))
{
}

std::shared_ptr<Domain> Domain::open(std::shared_ptr<Fabric> fabric, const Info& info)
{
    if (providers::traits_for(info.provider()).pins_memory)
        raise_memlock_once();
    fid_domain* raw = nullptr;
    detail::check(fi_domain(fabric->get(), const_cast<fi_info*>(info.get()), &raw, nullptr),
                  "fi_domain", info.provider());
    return std::make_shared<Domain>(Private{}, std::move(fabric), info,
                                    detail::FidPtr<fid_domain>(raw));
}

std::uint64_t Domain::reserve_key()
{
    const std::size_t key_size = info_->domain_attr->mr_key_size;
    const std::uint64_t mask =
        key_size == 0 || key_size >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * key_size)) - 1;
    std::lock_guard lock(mutex_);
    for (int attempt = 0; attempt < 64; ++attempt) {
        const std::uint64_t key = random_key() & mask;
        if (key != 0 && keys_.insert(key).second)
            return key;
    }
    detail::throw_error("reserve_key", -FI_ENOKEY, provider(),
                        fmt::format("no free {}-byte memory key after 64 random draws: too many "
                                    "registrations in this domain ({})",
                                    key_size, keys_.size()));
}

void Domain::release_key(std::uint64_t key) noexcept
{
    std::lock_guard lock(mutex_);
    keys_.erase(key);
}

void Domain::retire(std::shared_ptr<std::byte[]> memory, std::span<std::byte> pages) noexcept
{
    // A fresh private mapping over the range: the pages (of the heap or of a
    // mapped file) are released, a late write lands in zeroed memory, and
    // the range stays this domain's until it closes.
    if (mmap(pages.data(), pages.size(), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        return; // out of mappings: free it now, as before
    std::lock_guard lock(mutex_);
    retired_.push_back(std::move(memory));
}

} // namespace weft
