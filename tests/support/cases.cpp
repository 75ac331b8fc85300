// SPDX-License-Identifier: MIT
#include "cases.hpp"

#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace weft::test {

std::string Case::label() const
{
    return fmt::format("{}/{}{}", provider, to_string(kind),
                       same_host == SameHost::lane       ? "+lane"
                       : same_host == SameHost::enforced ? "+lane-enforced"
                                                         : "");
}

std::string test_address()
{
    const char* a = std::getenv("WEFT_TEST_ADDR");
    return a && *a ? a : "127.0.0.1";
}

std::string at(std::uint16_t port) { return fmt::format("{}:{}", test_address(), port); }

std::vector<Case> matrix()
{
    std::vector<Case> all = {
        {"tcp", EndpointKind::msg},       {"tcp;ofi_rxm", EndpointKind::rdm},
        {"sockets", EndpointKind::msg},   {"sockets", EndpointKind::rdm},
        {"shm", EndpointKind::rdm},       {"net", EndpointKind::msg},
        {"net", EndpointKind::rdm},       {"udp;ofi_rxd", EndpointKind::rdm},
        {"verbs", EndpointKind::msg},     {"verbs;ofi_rxm", EndpointKind::rdm},
        {"shm", EndpointKind::rdm, SameHost::lane},
        {"tcp", EndpointKind::msg, SameHost::lane},
    };
    const char* only = std::getenv("WEFT_TEST_PROVIDERS");
    if (!only || !*only)
        return all;
    std::vector<Case> out;
    std::stringstream ss(only);
    std::string item;
    while (std::getline(ss, item, ','))
        for (const auto& c : all)
            if (c.label() == item)
                out.push_back(c);
    if (out.empty()) { // each_cell() would index an empty list
        std::string labels;
        for (const auto& c : all)
            labels += (labels.empty() ? "" : ",") + c.label();
        throw std::invalid_argument(fmt::format(
            "WEFT_TEST_PROVIDERS={} names no cell: use labels from {}", only, labels));
    }
    return out;
}

Options options_for(const Case& c, Options base)
{
    base.provider = c.provider;
    base.kind = c.kind;
    base.allow_shm = true;
    base.same_host = c.same_host;
    if (base.node.empty())
        base.node = test_address();
    return base;
}

std::shared_ptr<Domain> domain_for(const Case& c, const Options& base)
{
    const auto sel = select(options_for(c, base));
    return Domain::open(Fabric::open(sel.info()), sel.info());
}

std::optional<std::string> unavailable(const Case& c, const Options& base)
{
    // select() is cheap but not free; remember answers per cell and mr_mode.
    static std::mutex m;
    static std::map<std::string, std::optional<std::string>> memo;
    const auto key = fmt::format("{}|{}", c.label(), base.force_mr_mode);
    {
        std::lock_guard lock(m);
        if (auto it = memo.find(key); it != memo.end())
            return it->second;
    }
    std::optional<std::string> why;
    try {
        auto domain = domain_for(c, base);
        // Forced mr_mode bits count as accepted only if registrations work too
        // (ofi_rxm keeps its core domain's own mode, so a forced PROV_KEY
        // makes every core registration ask for key 0).
        auto a = MemoryRegion::allocate(domain, 4096, Access::remote_read_write);
        auto b = MemoryRegion::allocate(domain, 4096, Access::remote_read_write);
    } catch (const std::exception& e) {
        why = e.what();
    }
    std::lock_guard lock(m);
    memo[key] = why;
    return why;
}

Pair connect_pair(const Case& c, const Options& base)
{
    const Options o = options_for(c, base);
    Server server(o, test_address(), 0);
    return connect_pair(server, o);
}

Pair connect_pair(Server& server, const Options& o)
{
    auto accepted = std::async(std::launch::async, [&] { return server.accept(soon()); });
    std::optional<Connection> client;
    try {
        client.emplace(Connection::connect(at(server.port()), client_options(server, o), soon()));
    } catch (const std::exception& e) {
        // Where the server failed too, both ends' view of the connection.
        std::string server_side;
        try {
            (void)accepted.get();
        } catch (const std::exception& se) {
            server_side = se.what();
        }
        if (server_side.empty())
            throw;
        throw std::runtime_error(fmt::format("client: {}\nserver: {}", e.what(), server_side));
    }
    return Pair{{}, accepted.get(), std::move(*client)};
}

namespace {
std::mutex graveyard_lock;
std::vector<std::shared_ptr<void>>* graveyard = new std::vector<std::shared_ptr<void>>;
} // namespace

Peers peers_of(Node& hub, const Options& o, std::size_t n)
{
    Peers p;
    for (std::size_t i = 0; i < n; ++i) {
        p.nodes.push_back(Node::open_like(o, hub.address()));
        p.ids.push_back(hub.add_peer(p.nodes.back()->address()));
    }
    return p;
}

Options client_options(const Server& server, Options o)
{
    o.provider.clear();
    o.allow_shm = server.selection().provider() == "shm";
    return o;
}

std::vector<RemoteRegion> exchange_all(const std::vector<Connection*>& ends,
                                       const std::vector<RemoteRegion>& offers)
{
    std::vector<std::future<RemoteRegion>> learning;
    for (std::size_t i = 0; i < ends.size(); ++i)
        learning.push_back(std::async(std::launch::async, [end = ends[i], offer = offers.at(i)] {
            return end->exchange(offer, soon());
        }));
    std::vector<RemoteRegion> learnt;
    for (auto& f : learning)
        learnt.push_back(f.get());
    return learnt;
}

void bury(std::shared_ptr<void> p)
{
    const std::lock_guard lock(graveyard_lock);
    graveyard->push_back(std::move(p));
}

std::size_t buried() noexcept
{
    const std::lock_guard lock(graveyard_lock);
    return graveyard->size();
}

} // namespace weft::test
