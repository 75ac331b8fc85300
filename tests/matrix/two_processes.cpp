// SPDX-License-Identifier: MIT
// The matrix across a process boundary: the target is weft-test-peer.
#include <catch2/catch.hpp>

#include <cstring>

#include "support/cases.hpp"
#include "support/test_peer.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

namespace {

std::uint64_t ask(Connection& c, char cmd, std::uint64_t a = 0, std::uint64_t b = 0,
                  std::uint64_t d = 0)
{
    std::array<std::byte, 25> m{};
    m[0] = static_cast<std::byte>(cmd);
    std::memcpy(&m[1], &a, 8);
    std::memcpy(&m[9], &b, 8);
    std::memcpy(&m[17], &d, 8);
    c.side().send(detail::Frame::data, m, soon());
    if (cmd == 'Q')
        return 0;
    const auto r = c.side().receive(detail::Frame::data, soon(60s));
    std::uint64_t v = 0;
    std::memcpy(&v, r.data(), 8);
    return v;
}

} // namespace

TEST_CASE("two processes: write, read, notify and messages across the boundary",
          "[matrix][process]")
{
    WEFT_EACH_CELL(c);
    auto peer = test::test_peer_server(c);
    Connection conn = test::connect_to(peer);
    CHECK(conn.selection().provider() == c.provider);
    CHECK_THAT(conn.peer_report(), Catch::Contains("weft: provider " + c.provider));
    auto mine = conn.allocate(8u << 20, Access::remote_read_write);
    const RemoteRegion remote = conn.exchange(mine->remote(), soon());
    Endpoint& ep = conn.endpoint();
    int ctx = 0;
    for (std::size_t size : {std::size_t{1}, std::size_t{4097}, std::size_t{(1u << 20) + 3},
                             std::size_t{4u << 20}}) {
        INFO("size " << size);
        test::fill_pattern(mine->bytes(), size);
        conn.write(mine->slice(5, size), remote, 3, &ctx);
        (void)ep.wait(&ctx, soon());
        conn.write_notify(mine->slice(0, 1), remote, 0, static_cast<std::uint32_t>(size), &ctx);
        (void)ep.wait(&ctx, soon());
        REQUIRE(ask(conn, 'N') == size); // the data is in place once notified
        CHECK(ask(conn, 'C', 3, size) == crc32c(mine->bytes().subspan(5, size)));

        CHECK(ask(conn, 'F', 11, size, size + 1) == 0);
        std::vector<std::byte> want(size);
        test::fill_pattern(want, size + 1);
        std::memset(mine->data(), 0, size + 7);
        conn.read(mine->slice(7, size), remote, 11, &ctx);
        (void)ep.wait(&ctx, soon());
        REQUIRE(std::memcmp(mine->data() + 7, want.data(), size) == 0);

        test::fill_pattern(mine->bytes().first(size), size + 2);
        conn.send(mine->slice(0, size), &ctx);
        CHECK(ask(conn, 'E') == size);
        const auto back = ep.wait_for(Op::recv, soon());
        REQUIRE(back.message.size() == size);
        REQUIRE(std::memcmp(back.message.data(), mine->data(), size) == 0);
        (void)ep.wait(&ctx, soon());
    }
    ask(conn, 'Q');
}
