// SPDX-License-Identifier: MIT
// Provider selection: the automatic order, overrides, and explanations of
// every rejection. Provider knowledge comes from providers/ only.
#include "weft/select/select.hpp"

#include <netinet/in.h>

#include <memory>
#include <string>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "traits.hpp"
#include "getinfo.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace {

using detail::Attempt;
using detail::InfoPtr;
using detail::env;
using detail::explain;
using detail::fi_provider_note;
using detail::getinfo_best;

/// An IPv6 link-local source address (fe80::/10): reachable on its own link only, and
/// every virtual port (a veth, a bridge's) has one.
bool link_local(const fi_info* i)
{
    if (i->addr_format != FI_SOCKADDR_IN6 || !i->src_addr || i->src_addrlen < sizeof(sockaddr_in6))
        return false;
    const auto* a = static_cast<const sockaddr_in6*>(i->src_addr);
    return IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr);
}

/// The entry to use: libfabric's first, but an IP provider's first interface address that
/// is not link-local when the caller named none. libfabric lists interfaces by link speed,
/// so that a veth or bridge port (10 Gb/s, link-local only) comes before eth0: a Node
/// bound there is unreachable from other hosts, and fails to open once the port goes
/// ("group: ... an interface with only a link-local address is not chosen").
const fi_info* entry_to_use(const Options& o, const fi_info* list, std::string& reason)
{
    if (!o.node.empty() || !link_local(list))
        return list;
    for (const fi_info* i = list->next; i; i = i->next)
        if (!link_local(i)) {
            reason += fmt::format("; interface {} rather than the link-local (fe80::) address "
                                  "of {}, libfabric's first",
                                  i->domain_attr->name ? i->domain_attr->name : "?",
                                  list->domain_attr->name ? list->domain_attr->name : "?");
            return i;
        }
    return list;
}

/// Options::same_host resolved, and what decided it when the application
/// left it automatic: WEFT_SAME_HOST (off, lane, enforced) where set, else the
/// lane unless `named` (who named the provider, e.g. "WEFT_PROVIDER=shm") is
/// not empty.
std::pair<SameHost, std::string> same_host_of(const Options& o, const std::string& named)
{
    const std::string v = env("WEFT_SAME_HOST");
    if (!v.empty() && v != "off" && v != "lane" && v != "enforced")
        throw UsageError("select", -FI_EINVAL, "",
                         fmt::format("WEFT_SAME_HOST={}: it takes off, lane or enforced "
                                     "(Options::same_host)",
                                     v));
    if (o.same_host != SameHost::automatic)
        return {o.same_host, {}};
    if (!v.empty())
        return {v == "off" ? SameHost::off : v == "lane" ? SameHost::lane : SameHost::enforced,
                "WEFT_SAME_HOST=" + v};
    if (named.empty())
        return {SameHost::lane, "automatic: no provider was named"};
    return {SameHost::off, fmt::format("automatic: {} named the provider", named)};
}

/// Who named the provider, when the application or its environment did.
std::string named_by(const Options& o)
{
    if (!o.provider.empty())
        return "Options::provider";
    const std::string v = env("WEFT_PROVIDER");
    return v.empty() ? std::string{} : "WEFT_PROVIDER=" + v;
}

Selection finish(const Options& options, InfoPtr list, std::string reason,
                 std::vector<Rejection> rejected, bool fell_back, const std::string& named)
{
    Options o = options;
    auto [same_host, same_host_from] = same_host_of(options, named);
    o.same_host = same_host;
    const std::string_view prov = list->fabric_attr->prov_name;
    if (o.force_mr_mode && providers::is_layered(prov))
        throw UsageError("select", -FI_EINVAL, std::string(prov),
                         fmt::format("forced mr_mode bits ({}) would stop at the {} utility layer: "
                                     "its core provider keeps its own addressing and keys, so RMA "
                                     "would fail. Force them on a core provider instead",
                                     mr_mode_string(o.force_mr_mode), prov));
    // The list order is libfabric's preference (but for link-local interfaces).
    Info info = Info::dup(entry_to_use(o, list.get(), reason));
    info->domain_attr->mr_mode |= static_cast<int>(o.force_mr_mode);
    const bool thread = wants_progress_thread(o, providers::quirks_for(info.get()));
    if (thread)
        info->domain_attr->threading = FI_THREAD_SAFE;
    return Selection(std::move(info), std::move(reason), std::move(rejected), fell_back, thread, o,
                     std::move(same_host_from));
}

std::string rejections_text(const std::vector<Rejection>& r)
{
    std::string out;
    for (const auto& x : r)
        out += fmt::format("\n  - {}: {}", x.provider, x.reason);
    return out;
}

} // namespace

bool wants_progress_thread(const ProgressOptions& o, const Quirks& quirks) noexcept
{
    switch (o.progress) {
    case Progress::polling: return false;
    case Progress::thread: return true;
    case Progress::automatic: return quirks.target_needs_progress;
    }
    return false;
}

Selection::Selection(Info info, std::string reason, std::vector<Rejection> rejected,
                     bool fell_back, bool progress_thread, Options options,
                     std::string same_host_from)
    : info_(std::move(info)), reason_(std::move(reason)), rejected_(std::move(rejected)),
      fell_back_(fell_back), progress_thread_(progress_thread), options_(std::move(options)),
      same_host_from_(std::move(same_host_from))
{
}

bool Selection::rdma() const noexcept { return providers::traits_for(provider()).rdma; }

std::string Selection::report() const
{
    const auto* i = info_.get();
    const auto mode = info_.mr_mode();
    std::string out = fmt::format("weft: provider {} ({} endpoint), fabric {}, domain {}\n",
                                  provider(), to_string(kind()), info_.fabric_name(),
                                  info_.domain_name());
    out += fmt::format("weft:   why: {}\n", reason_);
    if (const auto device = providers::describe(i); !device.empty())
        out += fmt::format("weft:   device: {}\n", device);
    for (const auto& r : rejected_)
        out += fmt::format("weft:   not {}: {}\n", r.provider, r.reason);
    if (fell_back_)
        out += "weft:   FALLBACK: no RDMA provider is usable, running without RDMA "
               "(Fallback::require_rdma turns this into an error)\n";
    out += fmt::format("weft:   caps: {}\n", info_.capabilities());
    if (const auto& prepared = providers::prepare_all(); !prepared.empty())
        out += fmt::format("weft:   set up: {}\n", prepared);
    out += fmt::format(
        "weft:   memory: {}, {}, {}{}\n",
        mode & FI_MR_VIRT_ADDR ? "virtual addresses" : "offsets from region start",
        mode & FI_MR_PROV_KEY ? "provider keys" : "weft-chosen random keys",
        mode & FI_MR_LOCAL ? "local descriptors required" : "no local descriptors needed",
        options_.force_mr_mode
            ? fmt::format(" (forced on: {})", mr_mode_string(options_.force_mr_mode))
            : std::string{});
    out += fmt::format("weft:   notify: {}\n",
                       info_.cq_data_size() > 0
                           ? fmt::format("fi_writedata ({} B of CQ data)", info_.cq_data_size())
                           : std::string("RMA write followed by a message (no CQ data)"));
    const bool needs = providers::quirks_for(i).target_needs_progress;
    std::string progress =
        !needs ? "the provider moves data by itself (AUTO)"
        : info_.manual_progress()
            ? "MANUAL: data moves only while the CQ is read"
            : "AUTO in name only: this provider moves data only while its CQ is read";
    if (progress_thread_)
        progress += fmt::format("; a weft progress thread checks every {} us and drives idle "
                                "endpoints, so passive targets never stall",
                                options_.progress_interval.count());
    else if (needs)
        progress += "; the application polls every endpoint, passive targets too "
                    "(Progress::polling)";
    out += fmt::format("weft:   progress: {}, threading {}\n", progress,
                       i->domain_attr->threading == FI_THREAD_SAFE ? "FI_THREAD_SAFE"
                                                                   : "FI_THREAD_DOMAIN");
    const std::string env_note =
        same_host_from_.empty() ? std::string{} : fmt::format(" ({})", same_host_from_);
    switch (options_.same_host) {
    case SameHost::automatic: // resolved by select(): never here
    case SameHost::off:
        out += fmt::format("weft:   same host: {} like any peer{}; SameHost::lane or "
                           "WEFT_SAME_HOST=lane takes weft's same-host lane\n",
                           provider(), env_note);
        break;
    case SameHost::lane:
        out += fmt::format("weft:   same host: weft's lane{} for peers whose address proves them "
                           "co-located (memcpy through sealed shared memory for memory weft "
                           "allocated, process_vm_* for other registered memory); {} for the "
                           "rest, each peer's path and why in Node::path(peer)\n",
                           env_note, provider());
        break;
    case SameHost::enforced:
        out += fmt::format("weft:   same host: weft's lane{}, enforced access only (sealed shared "
                           "memory weft allocated; process_vm_* excluded, this process "
                           "non-dumpable); {} for the rest, each peer's path in "
                           "Node::path(peer)\n",
                           env_note, provider());
        break;
    }
    return out;
}

Selection select(const Options& o)
{
    (void)same_host_of(o, {}); // a WEFT_SAME_HOST that means nothing, before anything else
    (void)providers::prepare_all();
    std::string requested = o.provider;
    std::string source = "Options::provider";
    if (requested.empty()) {
        requested = env("WEFT_PROVIDER");
        source = "WEFT_PROVIDER=" + requested;
    }
    const EndpointKind* kind = o.kind ? &*o.kind : nullptr;

    if (!requested.empty()) {
        const auto req = providers::parse_request(requested, kind);
        if (o.kind && req.kind_implied && *o.kind != req.kind)
            throw UsageError("select", -FI_EINVAL, requested,
                             fmt::format("{} is an {} provider but {} endpoints were asked for",
                                         requested, to_string(req.kind), to_string(*o.kind)));
        if (o.fallback == Fallback::require_rdma && !req.traits->rdma)
            throw UsageError("select", -FI_EINVAL, requested,
                             fmt::format("{} asks for {}, which is not RDMA, but require_rdma is "
                                         "set: drop one of the two",
                                         source, requested));
        if (req.traits->probe) {
            auto avail = req.traits->probe();
            if (!avail.usable)
                throw Error("fi_getinfo", -FI_ENODATA, req.path,
                            fmt::format("provider {} ({}) is not usable: {}", req.path, source,
                                        avail.detail));
        }
        Attempt a{.path = req.path, .kind = req.kind};
        InfoPtr list;
        if (getinfo_best(o, a, list) != 0)
            throw Error("fi_getinfo", -FI_ENODATA, req.path,
                        fmt::format("provider {} ({}) is not usable: {}", req.path, source,
                                    explain(o, a)));
        return finish(o, std::move(list), fmt::format("requested by {}", source), {}, false,
                      source);
    }

    std::vector<Rejection> rejected;
    bool rdma_rejected = false;
    for (const providers::Traits* t : providers::all()) {
        if (t->rank == 0)
            continue;
        auto e = detail::evaluate(o, *t, kind ? *kind : t->preferred);
        if (!e.list) {
            rejected.push_back({e.path, std::move(e.why)});
            rdma_rejected |= t->rdma;
            continue;
        }
        std::string reason = rejected.empty()
                                 ? fmt::format("first usable provider in the order {}",
                                               providers::order_text())
                                 : fmt::format("first usable provider in the order {}; the ones "
                                               "before it were not usable",
                                               providers::order_text());
        if (!e.found.empty())
            reason += fmt::format(" ({})", e.found);
        const bool fell_back = rdma_rejected && !t->rdma;
        return finish(o, std::move(e.list), std::move(reason), std::move(rejected), fell_back,
                      {});
    }
    throw Error("fi_getinfo", -FI_ENODATA, "",
                fmt::format("no provider fits{}:{}{}",
                            o.fallback == Fallback::require_rdma ? " (require_rdma)" : "",
                            rejections_text(rejected), fi_provider_note()));
}

Selection select_for_peer(const Options& o, std::string_view provider, EndpointKind kind,
                          std::uint32_t addr_format, const void* dest, std::size_t dest_len)
{
    (void)providers::prepare_all();
    Attempt a{.path = std::string(provider), .kind = kind};
    if (kind == EndpointKind::msg) {
        a.addr_format = addr_format;
        a.dest = dest;
        a.dest_len = dest_len;
    }
    InfoPtr list;
    if (getinfo_best(o, a, list) != 0)
        throw Error("fi_getinfo", -FI_ENODATA, std::string(provider),
                    fmt::format("the peer chose {} ({}), which is not usable here: {}", provider,
                                to_string(kind), explain(o, a)));
    // The peer's choice, not the application's: the lane stays automatic.
    return finish(o, std::move(list), fmt::format("the peer chose {}", provider), {}, false,
                  named_by(o));
}

std::string explain_enodata(const Options& o, std::string_view provider, EndpointKind kind)
{
    return explain(o, Attempt{.path = std::string(provider), .kind = kind});
}

} // namespace weft

namespace weft {

std::vector<Candidate> survey(const Options& o)
{
    (void)providers::prepare_all();
    std::vector<Candidate> out;
    const EndpointKind* kind = o.kind ? &*o.kind : nullptr;
    for (const providers::Traits* t : providers::all())
        for (const EndpointKind k : {EndpointKind::msg, EndpointKind::rdm}) {
            if ((kind && *kind != k) || providers::path_for(*t, k).empty())
                continue;
            auto e = detail::evaluate(o, *t, k);
            const bool usable = e.list != nullptr;
            out.push_back(Candidate{e.path, k, t->rank, t->rdma, usable,
                                    usable ? e.found : e.why, std::string(t->summary)});
        }
    return out;
}

} // namespace weft
