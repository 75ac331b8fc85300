// SPDX-License-Identifier: MIT
// The provider table and the lookups the rest of weft uses instead of
// comparing provider names.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "traits.hpp"
#include "check.hpp"
#include "weft/base/error.hpp"

namespace weft::providers {

namespace {

// One line per provider, in automatic selection order (rank > 0 first).
constexpr std::array<const Traits*, 6> table = {&shm, &verbs, &tcp, &sockets, &net, &udp};

const Traits generic = {
    .name = "",
    .summary = "a provider weft has no record for; used only when asked for by name",
};

std::string_view core_name(std::string_view fi_prov_name)
{
    return fi_prov_name.substr(0, fi_prov_name.find(';'));
}

} // namespace

std::span<const Traits* const> all() { return table; }

const Traits& traits_for(std::string_view fi_prov_name)
{
    const auto core = core_name(fi_prov_name);
    for (const Traits* t : table)
        if (t->name == core)
            return *t;
    return generic;
}

bool is_layered(std::string_view fi_prov_name) noexcept
{
    return fi_prov_name.find(';') != std::string_view::npos;
}

bool selective_completion(std::string_view fi_prov_name) noexcept
{
    return !is_layered(fi_prov_name) && traits_for(fi_prov_name).selective_completion;
}

std::string_view path_for(const Traits& t, EndpointKind kind)
{
    return kind == EndpointKind::msg ? t.msg_path : t.rdm_path;
}

Request parse_request(std::string_view name, const EndpointKind* kind)
{
    const Traits& t = traits_for(name);
    Request r{&t, std::string(name), false, t.preferred};
    if (is_layered(name)) {
        // A layered name ("tcp;ofi_rxm") is the RDM path of its core provider.
        r.kind_implied = true;
        r.kind = EndpointKind::rdm;
        return r;
    }
    if (kind)
        r.kind = *kind;
    if (t.name.empty())
        return r; // unknown provider: pass the name through as given
    if (auto p = path_for(t, r.kind); !p.empty())
        r.path = std::string(p);
    return r;
}

namespace {
// ofi_rxd's send window per peer, in packets (Quirks::send_window_packets): the
// FI_OFI_RXD_MAX_UNACKED it reads at start-up, 128 when unset (libfabric 1.17).
std::size_t rxd_send_window()
{
    if (const char* v = std::getenv("FI_OFI_RXD_MAX_UNACKED"); v && *v)
        if (const long n = std::strtol(v, nullptr, 10); n > 0)
            return static_cast<std::size_t>(n);
    return 128;
}
} // namespace

Quirks quirks_for(const fi_info* info)
{
    Quirks q;
    const Traits& t = traits_for(info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "");
    q.target_needs_progress =
        info->domain_attr->data_progress == FI_PROGRESS_MANUAL || t.auto_progress_needs_reads;
    q.keys_unchecked = t.keys_unchecked;
    q.remote_errors_silent = t.remote_errors_silent;
    q.atomics_unreliable = t.atomics_unreliable;
    q.dead_peer_blocks_endpoint = t.dead_peer_blocks_endpoint;
    q.dead_peer_can_hang_calls = t.dead_peer_can_hang_calls;
    q.reads_overtake_queued_writes = t.reads_overtake_queued_writes;
    q.ranges_wait_for_target = t.ranges_wait_for_target;
    q.wait_fd_stays_readable = t.wait_fd_stays_readable;
    q.rma_target_in_software = t.rma_target_in_software;
    const std::string_view name = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
    const bool rxm = name.find(";ofi_rxm") != std::string_view::npos;
    const bool rxd = name.find(";ofi_rxd") != std::string_view::npos; // over any core
    q.notify_source_unreliable = rxm || rxd;
    q.message_source_unreliable = rxd;
    if (rxd) // its "max_unacked" (rxd_init.c)
        q.send_window_packets = rxd_send_window();
    q.wait_fd_misses_data = rxm;
    if (t.refine_quirks)
        t.refine_quirks(info, q);
    return q;
}

std::string error_hint(std::string_view fi_prov_name, int code)
{
    const Traits& t = traits_for(fi_prov_name);
    return t.error_hint ? t.error_hint(code) : std::string{};
}

namespace {
// Every failure's message gets its provider's hint (the error layer asks
// through this hook, and names no provider itself).
[[maybe_unused]] const bool hints_installed = (detail::set_hint_source(&error_hint), true);
} // namespace

int before_enable(std::string_view fi_prov_name, fid_ep* ep)
{
    if (is_layered(fi_prov_name))
        return 0;
    const Traits& t = traits_for(fi_prov_name);
    return t.before_enable ? t.before_enable(ep) : 0;
}

std::shared_ptr<const detail::ProgressLock> progress_lock(std::string_view fi_prov_name, fid_ep* ep)
{
    if (is_layered(fi_prov_name))
        return nullptr;
    const Traits& t = traits_for(fi_prov_name);
    return t.progress_lock ? t.progress_lock(ep) : nullptr;
}

int before_endpoint(std::string_view fi_prov_name, fi_info* info)
{
    const Traits& t = traits_for(fi_prov_name);
    return t.before_endpoint ? t.before_endpoint(info) : 0;
}

int numa_node(const fi_info* info)
{
    const Traits& t = traits_for(info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "");
    if (t.numa_node)
        return t.numa_node(info);
    if (!t.ip_addressing || !info->domain_attr->name)
        return -1;
    // IP providers name their domain after the network interface.
    return read_numa_node(fmt::format("/sys/class/net/{}/device/numa_node", info->domain_attr->name));
}

int read_numa_node(const std::string& sysfs_path)
{
    std::FILE* f = std::fopen(sysfs_path.c_str(), "r");
    int node = -1;
    if (f) {
        if (std::fscanf(f, "%d", &node) != 1)
            node = -1;
        std::fclose(f);
    }
    return node;
}

std::string describe(const fi_info* info)
{
    const Traits& t = traits_for(info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "");
    return t.describe ? t.describe(info) : std::string{};
}

const std::string& prepare_all()
{
    static const std::string done = [] {
        std::string out;
        for (const Traits* t : table)
            if (t->prepare)
                if (auto what = t->prepare(); !what.empty())
                    out += fmt::format("{}{}", out.empty() ? "" : "; ", what);
        return out;
    }();
    return done;
}

std::string order_text()
{
    std::string out;
    for (const Traits* t : table) {
        if (t->rank == 0 || t->same_host_only)
            continue;
        out += fmt::format("{}{}", out.empty() ? "" : " > ", t->name);
    }
    for (const Traits* t : table)
        if (t->rank != 0 && t->same_host_only)
            out += fmt::format(" ({} first when both peers share a host and the caller allows it)",
                               t->name);
    return out;
}

} // namespace weft::providers
