// SPDX-License-Identifier: MIT
// The Store contract's batched reads, on every store: contains_each and
// live_each, get_now of values of any size, and a multi-get that waits only
// for the keys still missing.
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/every_store.hpp"
#include "weft/base/error.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::Opened;
using weft::test::store_kinds;

TEST_CASE("store: contains_each and live_each answer for every key, in order, across slices",
          "[store]")
{
    const Opened opened(GENERATE(range(0, static_cast<int>(store_kinds().size()))));
    INFO(opened.kind.name);
    const auto& s = opened.store;
    // 1500 keys: more than the TCP store asks in one request (1024).
    std::vector<std::string> keys;
    std::vector<bool> want;
    for (int i = 0; i < 1500; ++i) {
        keys.push_back(fmt::format("each/{}", i));
        want.push_back(i % 3 == 1 || i == 1499);
    }
    // Only a few are set on the slow stores (files, etcd): one in a hundred.
    if (opened.kind.name != "memory" && opened.kind.name != "tcp")
        for (std::size_t i = 0; i < want.size(); ++i)
            want[i] = i % 100 == 7 || i == 1499;
    for (std::size_t i = 0; i < keys.size(); ++i)
        if (want[i])
            s->set_while_alive(keys[i], std::string_view("1"));
    CHECK(s->contains_each(keys) == want);
    CHECK(s->live_each(keys) == want);
    CHECK(s->contains_each(std::span<const std::string>{}).empty());
    CHECK(s->erase("each/1499"));
    want.back() = false;
    CHECK(s->contains_each(keys) == want);
    const std::string bad[] = {"each/1", ""};
    CHECK_THROWS_AS(s->contains_each(bad), UsageError);
}

TEST_CASE("store: get_now reads what is there without waiting, values of any size, and a "
          "multi-get waits only for what is missing",
          "[store]")
{
    const Opened opened(GENERATE(range(0, static_cast<int>(store_kinds().size()))));
    INFO(opened.kind.name);
    const auto& s = opened.store;
    // Values that together pass what one TCP store answer carries (512 KiB),
    // and one larger than that alone.
    const std::vector<std::string> keys{"now/a", "now/b", "now/c", "now/d", "now/e"};
    std::vector<std::vector<std::byte>> values;
    for (const std::size_t size : {300'000u, 10u, 300'000u, 700'000u, 0u}) {
        std::vector<std::byte> v(size);
        for (std::size_t i = 0; i < size; ++i)
            v[i] = static_cast<std::byte>(i * 13 + size);
        values.push_back(std::move(v));
    }
    for (std::size_t i = 0; i < keys.size(); ++i)
        if (i != 1)
            s->set(keys[i], values[i]);
    const auto t = Clock::now();
    auto now = s->get_now(keys);
    CHECK(Clock::now() - t < 5s); // never waits for now/b
    REQUIRE(now.size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
        INFO(keys[i]);
        CHECK(now[i].has_value() == (i != 1));
        if (i != 1 && now[i])
            CHECK(*now[i] == values[i]);
    }
    // The multi-get: now/b comes later, from another member.
    std::thread later([&] {
        std::this_thread::sleep_for(200ms);
        s->set(keys[1], values[1]);
    });
    const auto all = s->get(keys, Deadline::after(10s));
    later.join();
    CHECK(all == values);
    const std::string bad[] = {"now/a", std::string(201, 'k')};
    CHECK_THROWS_AS(s->get_now(bad), UsageError);
}
