// SPDX-License-Identifier: MIT
// weft-test-store-member: one member of a store as a process of its own, for
// the store tests (stores/contract.cpp, stores/etcd.cpp).
//   weft-test-store-member file DIR count ME N
//   weft-test-store-member tcp HOST:PORT count ME N
//     member ME of N: 50 adds to "counter", its key rank/ME = ME*ME, a barrier,
//     then every member's key and the counter (N * 50) checked, a last barrier.
//     Exit status 0; 1 on an error, 2 on a wrong key, 3 on a wrong count.
//   weft-test-store-member etcd HOST:PORT PREFIX live KEY VALUE
//     holds KEY under PREFIX while it lives (a lease of 1 s), prints READY and
//     sleeps until killed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "weft/stores/etcd_store.hpp"
#include "weft/stores/store.hpp"
#include "weft/stores/tcp_store.hpp"
#include "support/die_with_parent.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

int count(Store& s, int me, int n)
{
    for (int i = 0; i < 50; ++i)
        (void)s.add("counter", 1);
    s.set(fmt::format("rank/{}", me), fmt::format("{}", me * me));
    s.barrier("up", static_cast<std::size_t>(n), Deadline::after(60s));
    int rc = 0;
    for (int j = 0; j < n; ++j)
        if (s.get_text(fmt::format("rank/{}", j), Deadline::after(1s)) != fmt::format("{}", j * j))
            rc = 2;
    if (s.add("counter", 0) != n * 50)
        rc = 3;
    s.barrier("done", static_cast<std::size_t>(n), Deadline::after(60s));
    return rc;
}

int live(Store& s, const std::string& key, const std::string& value)
{
    s.set_while_alive(key, std::string_view(value));
    std::printf("READY\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(120s); // killed before this ends
    return 1;
}

} // namespace

int main(int argc, char** argv)
{
    weft::test::die_with_parent();
    const std::string kind = argc > 1 ? argv[1] : "";
    const int at = kind == "etcd" ? 4 : 3; // the mode's place
    if (argc != at + 3 || (kind != "file" && kind != "tcp" && kind != "etcd")) {
        std::fprintf(stderr, "usage: weft-test-store-member file DIR | tcp HOST:PORT count ME N\n"
                             "       weft-test-store-member etcd HOST:PORT PREFIX live KEY VALUE\n");
        return 2;
    }
    const std::string mode = argv[at];
    try {
        std::unique_ptr<Store> s;
        if (kind == "file")
            s = std::make_unique<FileStore>(argv[2]);
        else if (kind == "tcp")
            s = std::make_unique<TcpStore>(argv[2], Deadline::after(10s));
        else
            s = std::make_unique<EtcdStore>(argv[2], Deadline::after(30s), argv[3], 1s);
        if (mode == "count")
            return count(*s, std::atoi(argv[at + 1]), std::atoi(argv[at + 2]));
        if (mode == "live")
            return live(*s, argv[at + 1], argv[at + 2]);
        std::fprintf(stderr, "weft-test-store-member: unknown mode %s\n", mode.c_str());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-test-store-member: %s\n", e.what());
        return 1;
    }
}
