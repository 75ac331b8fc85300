// SPDX-License-Identifier: MIT
#include "weft/info/info.hpp"
#include "check.hpp"

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft {

std::string_view to_string(EndpointKind kind) noexcept
{
    return kind == EndpointKind::msg ? "MSG" : "RDM";
}

Info Info::dup(const fi_info* entry)
{
    fi_info* copy = fi_dupinfo(entry);
    if (!copy)
        detail::throw_error("fi_dupinfo", -FI_ENOMEM, "");
    return Info(copy);
}

Info::Info(const Info& other) : Info(dup(other.get())) {}

Info& Info::operator=(const Info& other)
{
    if (this != &other)
        *this = dup(other.get());
    return *this;
}

static std::string_view sv(const char* s) { return s ? std::string_view(s) : std::string_view(); }

std::string_view Info::provider() const noexcept { return sv(p_->fabric_attr->prov_name); }
std::string_view Info::fabric_name() const noexcept { return sv(p_->fabric_attr->name); }
std::string_view Info::domain_name() const noexcept { return sv(p_->domain_attr->name); }

EndpointKind Info::kind() const noexcept
{
    return p_->ep_attr->type == FI_EP_MSG ? EndpointKind::msg : EndpointKind::rdm;
}

std::string Info::summary() const
{
    return fmt::format("{} {} fabric={} domain={}", provider(), to_string(kind()), fabric_name(),
                       domain_name());
}

std::string mr_mode_string(std::uint64_t mode)
{
    static constexpr std::pair<std::uint64_t, std::string_view> bits[] = {
        {FI_MR_LOCAL, "LOCAL"},         {FI_MR_RAW, "RAW"},
        {FI_MR_VIRT_ADDR, "VIRT_ADDR"}, {FI_MR_ALLOCATED, "ALLOCATED"},
        {FI_MR_PROV_KEY, "PROV_KEY"},   {FI_MR_MMU_NOTIFY, "MMU_NOTIFY"},
        {FI_MR_RMA_EVENT, "RMA_EVENT"}, {FI_MR_ENDPOINT, "ENDPOINT"},
        {FI_MR_HMEM, "HMEM"},
    };
    std::string out;
    for (const auto& [bit, name] : bits)
        if (mode & bit)
            out += fmt::format("{}{}", out.empty() ? "" : "|", name);
    return out.empty() ? "none" : out;
}

std::string Info::capabilities() const
{
    const bool atomics = has_caps(FI_ATOMIC);
    const std::size_t max_msg = max_msg_size();
    return fmt::format(
        "RMA {}, atomics {}, cq_data {} B, mr_mode {}, data progress {}, inject {} B, "
        "max message {}",
        has_caps(FI_RMA) ? "yes" : "no", atomics ? "yes" : "no", cq_data_size(),
        mr_mode_string(mr_mode()), manual_progress() ? "MANUAL" : "AUTO", inject_size(),
        max_msg >= (std::size_t{1} << 62) ? std::string("unlimited")
                                          : fmt::format("{} B", max_msg));
}

} // namespace weft
