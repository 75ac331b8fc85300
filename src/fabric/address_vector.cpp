// SPDX-License-Identifier: MIT
#include "weft/fabric/address_vector.hpp"
#include "check.hpp"

#include <rdma/fi_errno.h>

#include "weft/base/error.hpp"

namespace weft {

struct AddressVector::Private {};

AddressVector::AddressVector(Private, std::shared_ptr<Domain> domain, detail::FidPtr<fid_av> fid)
    : domain_(std::move(domain)), fid_(std::move(fid))
{
}

std::shared_ptr<AddressVector> AddressVector::open(std::shared_ptr<Domain> domain,
                                                   std::size_t expected_peers)
{
    fi_av_attr attr{};
    attr.type = FI_AV_TABLE;
    attr.count = expected_peers;
    fid_av* raw = nullptr;
    detail::check(fi_av_open(domain->get(), &attr, &raw, nullptr), "fi_av_open",
                  domain->provider());
    return std::make_shared<AddressVector>(Private{}, std::move(domain),
                                           detail::FidPtr<fid_av>(raw));
}

Peer AddressVector::insert(std::span<const std::byte> name)
{
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    const int n = fi_av_insert(fid_.get(), name.data(), 1, &addr, 0, nullptr);
    if (n != 1)
        detail::throw_error("fi_av_insert", n < 0 ? n : -FI_EINVAL, domain_->provider(),
                            "the peer address is not valid for this provider (was it produced "
                            "by an endpoint of the same provider?)");
    return Peer{addr};
}

void AddressVector::remove(Peer peer)
{
    detail::check(fi_av_remove(fid_.get(), &peer.addr, 1, 0), "fi_av_remove", domain_->provider());
}

} // namespace weft
