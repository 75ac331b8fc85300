// SPDX-License-Identifier: MIT
// host:port parsing (split_host_port: the side channel's and the tools'
// addresses), without any socket.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>

#include "socket.hpp"

using namespace weft;

TEST_CASE("host:port parsing rejects what it cannot use", "[bootstrap][bad-input]")
{
    CHECK(split_host_port("10.0.0.1:7471") == std::pair<std::string, std::uint16_t>{"10.0.0.1", 7471});
    CHECK(split_host_port("[::1]:80") == std::pair<std::string, std::uint16_t>{"::1", 80});
    CHECK(split_host_port(":0").first.empty());
    CHECK_THROWS_WITH(split_host_port("10.0.0.1"), Catch::Contains("has no port"));
    CHECK_THROWS_WITH(split_host_port("host:99999"), Catch::Contains("not a port number"));
    CHECK_THROWS_WITH(split_host_port("host:abc"), Catch::Contains("not a port number"));
}
