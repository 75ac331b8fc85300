// SPDX-License-Identifier: MIT
/// @brief The libfabric fabric object (fi_fabric). Root of every object tree:
/// opened from an Info (select.hpp chooses one), it is what a Domain, an
/// EventQueue and a Listener keep alive.
#pragma once

#include <memory>

#include <rdma/fabric.h>

#include "weft/base/detail/fid.hpp"
#include "weft/info/info.hpp"

namespace weft {

/// Owns a fid_fabric. Shared by its domains, listeners and event queues, which
/// keep it alive. Thread-safe to share; libfabric serializes fabric calls.
class Fabric {
public:
    static std::shared_ptr<Fabric> open(const Info& info);

    fid_fabric* get() const noexcept { return fid_.get(); }
    const Info& info() const noexcept { return info_; }
    std::string_view provider() const noexcept { return info_.provider(); }

    struct Private;
    Fabric(Private, Info info, detail::FidPtr<fid_fabric> fid);

private:
    Info info_;
    detail::FidPtr<fid_fabric> fid_;
};

} // namespace weft
