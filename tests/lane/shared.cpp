// SPDX-License-Identifier: MIT
// One allocation, many Nodes: memory allocate() made for sharing, registered
// whole on another Node of the process, is offered to that Node's co-located
// peers as the same sealed memfd (a GET of a KV table registered on a Node per
// client is a memcpy), with exactly the access the memfd's seal gives peers.
// (That a reader reaches it through the memfd alone, SameHost::enforced
// proves in a process of its own: "lane node: SameHost::enforced ...".)
#include <cstring>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "support/thrown.hpp"

using namespace weft;
using weft::test::soon;

TEST_CASE("lane node: an allocation registered whole on a second Node is offered as the same "
          "sealed memfd, and revoking either registration withdraws it alone",
          "[lane][node][memory]")
{
    const test::Case c{"shm", EndpointKind::rdm, SameHost::lane};
    WEFT_REQUIRE_CELL(c);
    const Options o = test::options_for(c);
    auto first = Node::open(o);  // allocates
    auto second = Node::open(o); // registers the same bytes
    auto reader = Node::open(o);
    const PeerId to_first = reader->add_peer(first->address());
    const PeerId to_second = reader->add_peer(second->address());
    (void)first->add_peer(reader->address());
    (void)second->add_peer(reader->address());

    auto table = first->allocate(8192, Access::remote_read);
    REQUIRE(table->segment() != nullptr);
    CHECK_FALSE(table->segment_borrowed());
    const std::span<std::byte> bytes(table->data(), table->size());
    auto again = second->register_memory(bytes, Access::remote_read);
    CHECK(again->segment() == table->segment());
    CHECK(again->segment_borrowed());
    CHECK(table->segment_shared());
    // Not borrowed: a writable registration of a memfd sealed read-only, a
    // part of it (a peer would map the rest too), a read-only registration of
    // a memfd peers may write, memory allocate() did not make.
    CHECK(second->register_memory(bytes, Access::remote_read_write)->segment() == nullptr);
    CHECK(second->register_memory(bytes.subspan(4096), Access::remote_read)->segment() == nullptr);
    auto writable = first->allocate(4096, Access::remote_read_write);
    CHECK(second->register_memory({writable->data(), writable->size()}, Access::remote_read)
              ->segment() == nullptr);
    std::vector<std::byte> plain(4096);
    CHECK(second->register_memory(plain, Access::remote_read)->segment() == nullptr);

    std::memcpy(table->data() + 4096, "from the owner", 14);
    auto sink = reader->allocate(64, Access::local);
    int ctx = 0;
    reader->read(to_second, sink->slice(0, 14), again->remote(), 4096, &ctx);
    (void)reader->wait(&ctx, soon());
    CHECK(std::memcmp(sink->data(), "from the owner", 14) == 0);
    REQUIRE(reader->on_lane(to_second));
    CHECK_THAT(reader->path(to_second), Catch::Contains("same-host lane"));

    // The allocation revoked while a second Node shares its memfd: withdrawn
    // from the first Node's peers alone; the second registration stands and
    // still reaches the same bytes.
    const RemoteRegion first_gone = table->remote();
    table->revoke();
    reader->read(to_first, sink->slice(0, 14), first_gone, 4096, &ctx);
    CHECK_THAT(test::thrown<Error>([&] { (void)reader->wait(&ctx, soon()); }),
               Catch::Contains("never registered, or revoked"));
    std::memcpy(table->data() + 4096, "still the same", 14);
    reader->read(to_second, sink->slice(0, 14), again->remote(), 4096, &ctx);
    (void)reader->wait(&ctx, soon());
    CHECK(std::memcmp(sink->data(), "still the same", 14) == 0);
    // And the borrowed registration revoked: withdrawn from its peers too.
    const RemoteRegion second_gone = again->remote();
    again->revoke();
    reader->read(to_second, sink->slice(0, 14), second_gone, 4096, &ctx);
    CHECK_THAT(test::thrown<Error>([&] { (void)reader->wait(&ctx, soon()); }),
               Catch::Contains("never registered, or revoked"));
}
