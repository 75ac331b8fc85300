// SPDX-License-Identifier: MIT
/// @brief The address vector (fi_av): peer addresses of an RDM endpoint.
/// Endpoint::insert_peer() fills it; a Node keeps one per RDM endpoint and maps
/// its fi_addr_t entries to PeerIds. Users of Node and Connection never see it.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include <rdma/fi_domain.h>

#include "weft/fabric/domain.hpp"
#include "weft/base/detail/fid.hpp"

namespace weft {

/// A peer of an endpoint. For MSG endpoints the default (FI_ADDR_UNSPEC) is the
/// connected peer; for RDM endpoints it comes from AddressVector::insert.
struct Peer {
    fi_addr_t addr = FI_ADDR_UNSPEC;
};

/// Owns a fid_av (FI_AV_TABLE); keeps its Domain alive. One thread at a time.
class AddressVector {
public:
    static std::shared_ptr<AddressVector> open(std::shared_ptr<Domain> domain,
                                               std::size_t expected_peers = 0);

    /// Inserts a raw endpoint name (from Endpoint::name() on the peer).
    Peer insert(std::span<const std::byte> name);
    void remove(Peer peer);

    fid_av* get() const noexcept { return fid_.get(); }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }

    struct Private;
    AddressVector(Private, std::shared_ptr<Domain> domain, detail::FidPtr<fid_av> fid);

private:
    std::shared_ptr<Domain> domain_;
    detail::FidPtr<fid_av> fid_;
};

} // namespace weft
