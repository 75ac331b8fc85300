// SPDX-License-Identifier: MIT
#include "weft/fabric/fabric.hpp"
#include "check.hpp"

#include "weft/base/error.hpp"

namespace weft {

struct Fabric::Private {};

Fabric::Fabric(Private, Info info, detail::FidPtr<fid_fabric> fid)
    : info_(std::move(info)), fid_(std::move(fid))
{
}

std::shared_ptr<Fabric> Fabric::open(const Info& info)
{
    fid_fabric* raw = nullptr;
    detail::check(fi_fabric(info->fabric_attr, &raw, nullptr), "fi_fabric", info.provider());
    return std::make_shared<Fabric>(Private{}, info, detail::FidPtr<fid_fabric>(raw));
}

} // namespace weft
