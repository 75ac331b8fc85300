// SPDX-License-Identifier: MIT
// Every Store kind the contract tests run on: memory, file, a TCP store with
// its server, and etcd where one can start here (support/etcd.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/etcd.hpp"
#include "support/temp_dir.hpp"
#include "weft/stores/etcd_store.hpp"
#include "weft/stores/store.hpp"
#include "weft/stores/tcp_store.hpp"

namespace weft::test {

struct Kind {
    std::string name;
    std::function<std::shared_ptr<Store>(const std::string& dir)> open;
};

/// A TCP store's server and one member's connection to it, kept together.
struct Served {
    StoreServer server{"127.0.0.1", 0};
    TcpStore store{server.address(), Deadline::after(std::chrono::seconds(10))};
};

inline std::shared_ptr<Store> served()
{
    auto both = std::make_shared<Served>();
    return {both, &both->store};
}

/// Every store; etcd where an etcd can start here (stores/etcd.cpp says
/// when it cannot), each store under a fresh prefix of one shared etcd.
inline const std::vector<Kind>& store_kinds()
{
    static const std::vector<Kind> all = [] {
        std::vector<Kind> k{
            {"memory", [](const std::string&) { return std::make_shared<MemoryStore>(); }},
            {"file", [](const std::string& dir) { return std::make_shared<FileStore>(dir); }},
            {"tcp", [](const std::string&) { return served(); }},
        };
        if (!test::Etcd::unavailable())
            k.push_back({"etcd", [](const std::string& dir) -> std::shared_ptr<Store> {
                             return std::make_shared<EtcdStore>(
                                 test::Etcd::shared().endpoint(),
                                 Deadline::after(std::chrono::seconds(30)), dir + "/");
                         }});
        return k;
    }();
    return all;
}

/// A store of each kind (GENERATE's index into store_kinds()) in a fresh directory.
struct Opened {
    explicit Opened(int index)
        : kind(store_kinds()[static_cast<std::size_t>(index)]), store(kind.open(dir.path))
    {
    }
    const Kind& kind;
    TempDir dir;
    std::shared_ptr<Store> store;
};

} // namespace weft::test
