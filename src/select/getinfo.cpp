// SPDX-License-Identifier: MIT
#include "getinfo.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

namespace weft::detail {
namespace {

// Everything weft's memory code handles; FI_MR_RAW, FI_MR_MMU_NOTIFY,
// FI_MR_RMA_EVENT and FI_MR_HMEM are not offered.
constexpr std::uint64_t supported_mr_mode =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
// Receive slots are always posted, so remote CQ data may consume them.
constexpr std::uint64_t supported_mode = FI_RX_CQ_DATA;



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
            InfoPtr drop(i); // alone: its next is cut
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

} // namespace

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

/// fi_getinfo with atomics if the provider has them, else without; on RDM
/// with FI_SOURCE first (a Node names the peer of each completion by it).
int getinfo_best(const Options& o, Attempt a, InfoPtr& out)
{
    if (a.kind == EndpointKind::rdm && a.with_kind && !(a.caps & FI_SOURCE)) {
        Attempt with_source = a;
        with_source.caps |= FI_SOURCE;
        if (getinfo_best(o, with_source, out) == 0)
            return 0;
    }
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

static std::string list_domains(const Options& o, const std::string& path)
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

Evaluation evaluate(const Options& o, const providers::Traits& t, EndpointKind kind)
{
    Evaluation e;
    e.kind = kind;
    const auto path = providers::path_for(t, kind);
    e.path = std::string(path.empty() ? t.name : path);
    if (t.same_host_only && !o.allow_shm) {
        e.why = "peers not known to share this host (Options::allow_shm)";
        return e;
    }
    if (o.fallback == Fallback::require_rdma && !t.rdma) {
        e.why = "not RDMA, and require_rdma is set";
        return e;
    }
    if (path.empty()) {
        e.why = fmt::format("has no {} endpoints", to_string(kind));
        return e;
    }
    if (t.probe) {
        auto avail = t.probe();
        if (!avail.usable) {
            e.why = std::move(avail.detail);
            return e;
        }
        e.found = std::move(avail.detail);
    }
    Attempt a{.path = e.path, .kind = kind};
    if (getinfo_best(o, a, e.list) != 0)
        e.why = explain(o, a);
    return e;
}

std::string providers_with_atomics()
{
    Options o;
    o.allow_shm = true;
    std::string out;
    for (const providers::Traits* t : providers::all()) {
        std::string kinds;
        for (const EndpointKind k : {EndpointKind::msg, EndpointKind::rdm}) {
            const Evaluation e = evaluate(o, *t, k);
            if (e.list && (e.list->caps & FI_ATOMIC) &&
                !providers::quirks_for(e.list.get()).atomics_unreliable)
                kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", to_string(k));
        }
        if (!kinds.empty())
            out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", t->name, kinds);
    }
    return out;
}

} // namespace weft::detail
