// SPDX-License-Identifier: MIT
// Provider selection: the automatic order, overrides, and explanations of
// every rejection. Provider knowledge comes from providers/ only.
#include "weft/select.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "../providers/traits.hpp"
#include "weft/error.hpp"

namespace weft {
namespace {

// Everything weft's memory code handles; FI_MR_RAW, FI_MR_MMU_NOTIFY,
// FI_MR_RMA_EVENT and FI_MR_HMEM are not offered.
constexpr std::uint64_t supported_mr_mode =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
// Receive slots are always posted, so remote CQ data may consume them.
constexpr std::uint64_t supported_mode = FI_RX_CQ_DATA;
constexpr std::uint64_t base_caps = FI_MSG | FI_RMA;

struct InfoDeleter {
    void operator()(fi_info* i) const noexcept { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// The attributes of one fi_getinfo attempt; explain_enodata switches them on one by one.
struct Attempt {
    std::string path;
    bool with_kind = true;
    EndpointKind kind = EndpointKind::msg;
    std::uint64_t caps = base_caps;
    bool with_mr_mode = true;
    bool with_mode = true;
    bool with_domain = true;
    bool with_node = true;
    bool with_depth = true;
    // client side: the peer's address
    std::uint32_t addr_format = FI_FORMAT_UNSPEC;
    const void* dest = nullptr;
    std::size_t dest_len = 0;
};

/// Keeps only entries of the requested domain: some providers (tcp) ignore a
/// domain name they do not know and return another one instead.
int keep_domain(InfoPtr& list, const std::string& domain)
{
    fi_info* keep = nullptr;
    fi_info** tail = &keep;
    fi_info* next = nullptr;
    for (fi_info* i = list.release(); i; i = next) {
        next = i->next;
        i->next = nullptr;
        if (i->domain_attr->name && domain == i->domain_attr->name) {
            *tail = i;
            tail = &i->next;
        } else {
            fi_freeinfo(i);
        }
    }
    list.reset(keep);
    return keep ? 0 : -FI_ENODATA;
}

/// True when `node` names an address of a local interface (what FI_SOURCE needs).
bool is_local_address(const std::string& node)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    addrinfo* res = nullptr;
    if (getaddrinfo(node.c_str(), nullptr, &hints, &res) != 0)
        return false;
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) != 0) {
        freeaddrinfo(res);
        return true; // cannot tell: let the provider decide
    }
    bool found = false;
    for (const addrinfo* a = res; a && !found; a = a->ai_next)
        for (const ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != a->ai_family)
                continue;
            if (a->ai_family == AF_INET)
                found = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr ==
                        reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
            else if (a->ai_family == AF_INET6)
                found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr,
                                    &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                                    sizeof(in6_addr)) == 0;
        }
    freeifaddrs(ifs);
    freeaddrinfo(res);
    return found;
}

int getinfo(const Options& o, const Attempt& a, InfoPtr& out)
{
    InfoPtr hints(fi_allocinfo());
    if (!hints)
        return -FI_ENOMEM;
    hints->fabric_attr->prov_name = strdup(a.path.c_str());
    hints->caps = a.caps;
    if (a.with_mode)
        hints->mode = supported_mode;
    else
        hints->mode = ~0ULL;
    if (a.with_kind)
        hints->ep_attr->type = a.kind == EndpointKind::msg ? FI_EP_MSG : FI_EP_RDM;
    hints->domain_attr->mr_mode = a.with_mr_mode ? static_cast<int>(supported_mr_mode) : 0;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    if (a.with_domain && !o.domain.empty())
        hints->domain_attr->name = strdup(o.domain.c_str());
    if (a.with_depth) {
        hints->tx_attr->size = o.tx_depth;
        hints->rx_attr->size = o.rx_depth;
    }
    if (a.dest) {
        hints->addr_format = a.addr_format;
        hints->dest_addr = std::malloc(a.dest_len);
        std::memcpy(hints->dest_addr, a.dest, a.dest_len);
        hints->dest_addrlen = a.dest_len;
    }
    const bool ip = providers::traits_for(a.path).ip_addressing;
    const char* node = a.with_node && ip && !o.node.empty() && !a.dest ? o.node.c_str() : nullptr;
    if (node && !is_local_address(node))
        return -FI_ENODATA;
    fi_info* raw = nullptr;
    const int ret = fi_getinfo(fi_api_version, node, nullptr, node ? FI_SOURCE : 0, hints.get(), &raw);
    out.reset(ret == 0 ? raw : nullptr);
    if (ret == 0 && a.with_domain && !o.domain.empty())
        return keep_domain(out, o.domain);
    return ret;
}

/// fi_getinfo with atomics if the provider has them, else without.
int getinfo_best(const Options& o, Attempt a, InfoPtr& out)
{
    Attempt with_atomics = a;
    with_atomics.caps |= FI_ATOMIC;
    if (getinfo(o, with_atomics, out) == 0)
        return 0;
    return getinfo(o, a, out);
}

std::string env(const char* name)
{
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string fi_provider_note()
{
    const auto v = env("FI_PROVIDER");
    return v.empty() ? std::string{}
                     : fmt::format(" (FI_PROVIDER={} is set: libfabric loads only what it names)", v);
}

std::string list_domains(const Options& o, const std::string& path)
{
    Attempt a{.path = path, .with_kind = false, .caps = 0, .with_mr_mode = false,
              .with_mode = false, .with_domain = false, .with_node = false, .with_depth = false};
    InfoPtr list;
    if (getinfo(o, a, list) != 0)
        return "none";
    std::string out;
    for (const fi_info* i = list.get(); i; i = i->next) {
        std::string d = i->domain_attr->name ? i->domain_attr->name : "?";
        if (out.find(d) == std::string::npos)
            out += fmt::format("{}{}", out.empty() ? "" : ", ", d);
    }
    return out;
}

std::string explain(const Options& o, const Attempt& target)
{
    InfoPtr probe;
    Attempt a = target;
    a.with_kind = false;
    a.caps = 0;
    a.with_mr_mode = false;
    a.with_mode = false;
    a.with_domain = false;
    a.with_node = false;
    a.with_depth = false;
    a.dest = nullptr;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("libfabric offers no usable {} here (not built in, or no device or "
                           "interface it can use){}",
                           a.path, fi_provider_note());
    a.with_kind = true;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} has no {} endpoints", a.path, to_string(a.kind));
    a.caps = target.caps;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} offers no RMA on {} endpoints", a.path, to_string(a.kind));
    const std::uint64_t wants = probe->domain_attr->mr_mode;
    a.with_mr_mode = true;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} requires memory-registration modes weft does not support ({})",
                           a.path, mr_mode_string(wants & ~supported_mr_mode));
    a.with_mode = true;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} requires operation modes weft does not provide", a.path);
    a.with_domain = true;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} has no domain named '{}' (its domains: {})", a.path, o.domain,
                           list_domains(o, a.path));
    a.with_node = true;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} cannot bind to address '{}': no local interface has it", a.path,
                           o.node);
    a.with_depth = true;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} cannot give queue depths tx={} rx={}", a.path, o.tx_depth,
                           o.rx_depth);
    a.dest = target.dest;
    a.dest_len = target.dest_len;
    a.addr_format = target.addr_format;
    if (getinfo(o, a, probe) != 0)
        return fmt::format("{} cannot reach the peer's address from here", a.path);
    return fmt::format("{} rejected this combination of attributes (FI_LOG_LEVEL=info shows "
                       "libfabric's reasoning)",
                       a.path);
}

Selection finish(const Options& o, InfoPtr list, std::string reason, std::vector<Rejection> rejected,
                 bool fell_back)
{
    const std::string_view prov = list->fabric_attr->prov_name;
    if (o.force_mr_mode && providers::is_layered(prov))
        throw UsageError("select", -FI_EINVAL, std::string(prov),
                         fmt::format("forced mr_mode bits ({}) would stop at the {} utility layer: "
                                     "its core provider keeps its own addressing and keys, so RMA "
                                     "would fail. Force them on a core provider instead",
                                     mr_mode_string(o.force_mr_mode), prov));
    // Take the first entry; the list order is libfabric's preference.
    Info info = Info::dup(list.get());
    info->domain_attr->mr_mode |= static_cast<int>(o.force_mr_mode);
    const bool thread = wants_progress_thread(o, providers::quirks_for(info.get()));
    if (thread)
        info->domain_attr->threading = FI_THREAD_SAFE;
    return Selection(std::move(info), std::move(reason), std::move(rejected), fell_back, thread, o);
}

std::string rejections_text(const std::vector<Rejection>& r)
{
    std::string out;
    for (const auto& x : r)
        out += fmt::format("\n  - {}: {}", x.provider, x.reason);
    return out;
}

} // namespace

bool wants_progress_thread(const Options& o, const Quirks& quirks) noexcept
{
    switch (o.progress) {
    case Progress::polling: return false;
    case Progress::thread: return true;
    case Progress::automatic: return quirks.target_needs_progress;
    }
    return false;
}

Selection::Selection(Info info, std::string reason, std::vector<Rejection> rejected,
                     bool fell_back, bool progress_thread, Options options)
    : info_(std::move(info)), reason_(std::move(reason)), rejected_(std::move(rejected)),
      fell_back_(fell_back), progress_thread_(progress_thread), options_(std::move(options))
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
               "(Fallback::require_rdma or --require-rdma turns this into an error)\n";
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
    return out;
}

Selection select(const Options& o)
{
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
        return finish(o, std::move(list), fmt::format("requested by {}", source), {}, false);
    }

    std::vector<Rejection> rejected;
    bool rdma_rejected = false;
    for (const providers::Traits* t : providers::all()) {
        if (t->rank == 0)
            continue;
        const auto k = kind ? *kind : t->preferred;
        const auto path = providers::path_for(*t, k);
        auto reject = [&](std::string why) {
            rejected.push_back({std::string(path.empty() ? t->name : path), std::move(why)});
            rdma_rejected |= t->rdma;
        };
        if (t->same_host_only && !o.allow_shm) {
            reject("peers not known to share this host (Options::allow_shm / --shm)");
            continue;
        }
        if (o.fallback == Fallback::require_rdma && !t->rdma) {
            reject("not RDMA, and require_rdma is set");
            continue;
        }
        if (path.empty()) {
            reject(fmt::format("has no {} endpoints", to_string(k)));
            continue;
        }
        std::string found;
        if (t->probe) {
            auto avail = t->probe();
            if (!avail.usable) {
                reject(avail.detail);
                continue;
            }
            found = std::move(avail.detail);
        }
        Attempt a{.path = std::string(path), .kind = k};
        InfoPtr list;
        if (getinfo_best(o, a, list) != 0) {
            reject(explain(o, a));
            continue;
        }
        std::string reason = rejected.empty()
                                 ? fmt::format("first usable provider in the order {}",
                                               providers::order_text())
                                 : fmt::format("first usable provider in the order {}; the ones "
                                               "before it were not usable",
                                               providers::order_text());
        if (!found.empty())
            reason += fmt::format(" ({})", found);
        const bool fell_back = rdma_rejected && !t->rdma;
        return finish(o, std::move(list), std::move(reason), std::move(rejected), fell_back);
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
    return finish(o, std::move(list), fmt::format("the peer chose {}", provider), {}, false);
}

std::string explain_enodata(const Options& o, std::string_view provider, EndpointKind kind)
{
    return explain(o, Attempt{.path = std::string(provider), .kind = kind});
}

} // namespace weft
