// SPDX-License-Identifier: MIT
#include "info.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include <rdma/fabric.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "verbs_devices.hpp"
#include "weft/weft.hpp"

namespace weft::tool {
namespace {

using nlohmann::json;


/// Whether `provider` is `filter` or a stack over it ("tcp;ofi_rxm" over tcp
/// or over ofi_rxm); an empty filter takes every provider.
bool matches(std::string_view provider, std::string_view filter)
{
    if (filter.empty() || provider == filter)
        return true;
    for (std::size_t pos = 0;;) {
        const std::size_t semi = provider.find(';', pos);
        if (provider.substr(pos, semi - pos) == filter)
            return true;
        if (semi == std::string_view::npos)
            return false;
        pos = semi + 1;
    }
}

/// One row per provider, endpoint type and domain, with the attributes of
/// libfabric's first (preferred) entry for it: tcp lists each network of an
/// interface, IPv4 and IPv6, as a fabric of its own (they become the row's
/// "fabrics"), and shm adds an entry for device memory (FI_HMEM) that weft does
/// not use.
json provider_rows(std::string_view filter)
{
    json rows = json::array();
    fi_info* raw = nullptr;
    if (fi_getinfo(fi_api_version, nullptr, nullptr, 0, nullptr, &raw) != 0)
        return rows;
    const weft::detail::InfoPtr list(raw);
    std::map<std::tuple<std::string, std::string, std::string>, std::size_t> row_of;
    for (const fi_info* i = list.get(); i; i = i->next) {
        if (i->ep_attr->type != FI_EP_MSG && i->ep_attr->type != FI_EP_RDM)
            continue; // datagram endpoints: no RMA, nothing weft uses
        const Info one = Info::dup(i);
        if (!matches(one.provider(), filter))
            continue;
        const std::string fabric(one.fabric_name());
        const auto key = std::make_tuple(std::string(one.provider()),
                                         std::string(to_string(one.kind())),
                                         std::string(one.domain_name()));
        if (const auto it = row_of.find(key); it != row_of.end()) {
            auto& fabrics = rows[it->second]["fabrics"];
            if (std::find(fabrics.begin(), fabrics.end(), fabric) == fabrics.end())
                fabrics.push_back(fabric);
            continue;
        }
        row_of.emplace(key, rows.size());
        rows.push_back({{"provider", std::get<0>(key)},
                        {"endpoint", std::get<1>(key)},
                        {"domain", std::get<2>(key)},
                        {"fabrics", json::array({fabric})},
                        {"rma", one.has_caps(FI_RMA)},
                        {"atomics", one.has_caps(FI_ATOMIC)},
                        {"cq_data_size", one.cq_data_size()},
                        {"mr_mode", mr_mode_string(one.mr_mode())},
                        {"data_progress", one.manual_progress() ? "MANUAL" : "AUTO"},
                        {"inject_size", one.inject_size()}});
    }
    return rows;
}

json device_rows(const json& providers)
{
    json rows = json::array();
    for (const auto& d : providers::verbs_devices()) {
        json ports = json::array();
        for (const auto& p : d.ports)
            ports.push_back({{"port", p.number},
                             {"state", p.state},
                             {"link_layer", p.link_layer},
                             {"kind", providers::to_string(p.kind)},
                             {"active_mtu", p.active_mtu},
                             {"speed", p.speed},
                             {"gid_index", p.gid_index},
                             {"gid", p.gid},
                             {"gid_type", p.gid_type}});
        json maps = json::array();
        for (const auto& row : providers) {
            const std::string domain = row["domain"];
            if (domain.rfind(d.name, 0) == 0)
                maps.push_back({{"provider", row["provider"]},
                                {"fabrics", row["fabrics"]},
                                {"domain", domain},
                                {"endpoint", row["endpoint"]}});
        }
        rows.push_back({{"name", d.name},
                        {"transport", d.transport},
                        {"node_type", d.node_type},
                        {"max_cqe", d.max_cqe},
                        {"atomics", d.atomics},
                        {"ports", ports},
                        {"libfabric", maps}});
    }
    return rows;
}

json order_rows(std::string_view filter)
{
    json rows = json::array();
    for (const auto& c : survey(Options{{.allow_shm = true}}))
        if (matches(c.provider, filter))
            rows.push_back({{"provider", c.provider},
                        {"endpoint", to_string(c.kind)},
                        {"rank", c.rank},
                        {"rdma", c.rdma},
                        {"usable", c.usable},
                        {"detail", c.detail},
                        {"summary", c.summary}});
    return rows;
}

json choice(bool allow_shm, const std::string& provider)
{
    try {
        Options o;
        o.allow_shm = allow_shm;
        o.provider = provider;
        const Selection s = select(o);
        return {{"provider", s.provider()},
                {"endpoint", to_string(s.kind())},
                {"fabric", s.info().fabric_name()},
                {"domain", s.info().domain_name()},
                {"reason", s.reason()},
                {"fell_back", s.fell_back()},
                {"rdma", s.rdma()}};
    } catch (const std::exception& e) {
        return {{"error", e.what()}};
    }
}

void print_human(const json& j)
{
    std::printf("libfabric %s\n\n", j["libfabric"].get<std::string>().c_str());
    std::printf("Providers (MSG and RDM endpoints), one line per domain with the fabrics it "
                "is on:\n");
    std::printf("  %-16s %-4s %-8s %-4s %-7s %-7s %-28s %-8s %-7s %s\n", "provider", "ep",
                "domain", "rma", "atomics", "cq_data", "mr_mode", "progress", "inject", "fabrics");
    for (const auto& r : j["providers"]) {
        std::string fabrics;
        for (const auto& f : r["fabrics"])
            fabrics += (fabrics.empty() ? "" : ", ") + f.get<std::string>();
        std::printf("  %-16s %-4s %-8s %-4s %-7s %-7s %-28s %-8s %-7s %s\n",
                    r["provider"].get<std::string>().c_str(),
                    r["endpoint"].get<std::string>().c_str(), r["domain"].get<std::string>().c_str(),
                    r["rma"].get<bool>() ? "yes" : "no", r["atomics"].get<bool>() ? "yes" : "no",
                    fmt::format("{} B", r["cq_data_size"].get<std::size_t>()).c_str(),
                    r["mr_mode"].get<std::string>().c_str(),
                    r["data_progress"].get<std::string>().c_str(),
                    fmt::format("{} B", r["inject_size"].get<std::size_t>()).c_str(),
                    fabrics.c_str());
    }
    std::printf("\nRDMA devices:\n");
    if (j["rdma_devices"].empty())
        std::printf("  none (libibverbs lists no device)\n");
    for (const auto& d : j["rdma_devices"]) {
        std::printf("  %s: transport %s, node %s, max_cqe %zu, atomics %s\n",
                    d["name"].get<std::string>().c_str(), d["transport"].get<std::string>().c_str(),
                    d["node_type"].get<std::string>().c_str(), d["max_cqe"].get<std::size_t>(),
                    d["atomics"].get<bool>() ? "yes" : "no");
        for (const auto& p : d["ports"])
            std::printf("    port %u: %s, %s, link layer %s, MTU %u, %s; GID %d (%s %s)\n",
                        p["port"].get<unsigned>(), p["kind"].get<std::string>().c_str(),
                        p["state"].get<std::string>().c_str(),
                        p["link_layer"].get<std::string>().c_str(), p["active_mtu"].get<unsigned>(),
                        p["speed"].get<std::string>().c_str(), p["gid_index"].get<int>(),
                        p["gid_type"].get<std::string>().c_str(), p["gid"].get<std::string>().c_str());
        for (const auto& m : d["libfabric"]) {
            std::string fabrics;
            for (const auto& f : m["fabrics"])
                fabrics += (fabrics.empty() ? "" : ", ") + f.get<std::string>();
            std::printf("    libfabric: %s %s domain %s, fabric%s %s\n",
                        m["provider"].get<std::string>().c_str(),
                        m["endpoint"].get<std::string>().c_str(),
                        m["domain"].get<std::string>().c_str(), m["fabrics"].size() > 1 ? "s" : "",
                        fabrics.c_str());
        }
    }
    std::printf("\nThe order weft chooses in (shm only when the caller allows it):\n");
    for (const auto& r : j["order"]) {
        const int rank = r["rank"];
        std::printf("  %-4s %-16s %-4s %-10s %s\n", rank ? fmt::format("{}.", rank).c_str() : "-",
                    r["provider"].get<std::string>().c_str(),
                    r["endpoint"].get<std::string>().c_str(),
                    r["usable"].get<bool>() ? "usable" : "unusable",
                    (r["usable"].get<bool>() ? r["detail"].get<std::string>()
                                             : "because " + r["detail"].get<std::string>())
                        .c_str());
    }
    std::printf("  (- = used only when asked for by name)\n\n");
    for (const char* key : {"choice", "choice_with_shm"}) {
        const auto& c = j[key];
        const std::string asked = j.contains("filter") ? fmt::format(
                                                             " (with -p {})", j["filter"].get<std::string>())
                                                       : "";
        const std::string label = std::string(key) == "choice"
                                      ? "weft would choose" + asked
                                      : "with both peers on this host" + asked;
        if (c.contains("error"))
            std::printf("%s: nothing (%s)\n", label.c_str(), c["error"].get<std::string>().c_str());
        else
            std::printf("%s: %s %s on %s / %s%s\n", label.c_str(), c["provider"].get<std::string>().c_str(),
                        c["endpoint"].get<std::string>().c_str(),
                        c["fabric"].get<std::string>().c_str(),
                        c["domain"].get<std::string>().c_str(),
                        c["fell_back"].get<bool>() ? " (fallback: no RDMA)" : "");
    }
}

} // namespace

int info(const InfoOptions& options)
{
    json j;
    j["libfabric"] =
        fmt::format("{}.{}", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
    if (!options.provider.empty())
        j["filter"] = options.provider;
    j["providers"] = provider_rows(options.provider);
    j["rdma_devices"] = device_rows(j["providers"]);
    j["order"] = order_rows(options.provider);
    if (!options.provider.empty() && j["providers"].empty() && j["order"].empty()) {
        std::set<std::string> names;
        for (const auto& r : provider_rows(""))
            names.insert(r["provider"].get<std::string>());
        for (const auto& r : order_rows(""))
            names.insert(r["provider"].get<std::string>());
        std::fprintf(stderr, "weft info: no provider '%s' here; the providers are: %s\n",
                     options.provider.c_str(), fmt::format("{}", fmt::join(names, ", ")).c_str());
        return 1;
    }
    j["choice"] = choice(false, options.provider);
    j["choice_with_shm"] = choice(true, options.provider);
    if (options.json)
        std::printf("%s\n", j.dump(2).c_str());
    else
        print_human(j);
    return 0;
}

} // namespace weft::tool
