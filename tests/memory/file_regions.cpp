// SPDX-License-Identifier: MIT
// Zero-copy file regions: a peer reads an mmap'ed file through its
// registration, and sees a change to the file.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <vector>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;

TEST_CASE("file regions: peers read an mmap'ed file, no copy", "[file][rma]")
{
    test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    char path[] = "/tmp/weft-file-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    std::vector<std::byte> content((1u << 20) + 7);
    test::fill_pattern(content, 123);
    REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    auto p = test::connect_pair(c);
    auto file = MemoryRegion::map_file(p.server.domain(), path);
    p.exposed.push_back(file);
    CHECK(file->size() == content.size());
    const RemoteRegion remote = file->remote();
    CHECK(remote.is_readable());
    CHECK_FALSE(remote.is_writable());
    auto sink = p.client.allocate(content.size(), Access::local);
    int ctx = 0;
    p.client.read(sink->all(), remote, 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    CHECK(std::memcmp(sink->data(), content.data(), content.size()) == 0);
    // The registration is the mapping itself: a change to the file shows.
    const char patch[] = "weft";
    REQUIRE(pwrite(fd, patch, 4, 1000) == 4);
    p.client.read(sink->slice(0, 4), remote, 1000, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    CHECK(std::memcmp(sink->data(), patch, 4) == 0);
    close(fd);
    unlink(path);
}
