// SPDX-License-Identifier: MIT
// Who comes to a Node's lane. A Server on shm with the same-host lane: clients
// on the lane share its one Node (nothing of theirs goes through shm's queues,
// which a dead client could wedge), so one registration serves them all; a
// client off the lane gets a Node of its own, as every shm client did before.
// And strangers on a lane's listener cost its peers nothing.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <future>
#include <map>
#include <vector>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "support/open_fds.hpp"
#include "support/pattern.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

const test::Case shm_lane{"shm", EndpointKind::rdm, SameHost::lane};

} // namespace

TEST_CASE("lane server: on shm, clients on the same-host lane share the server's one Node and one "
          "registration, and a client off the lane gets a Node of its own",
          "[lane][server]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    const Options o = test::options_for(shm_lane);
    Server server(o, test::test_address(), 0);
    const Options on = test::client_options(server, o);
    Options off = on;
    off.same_host = SameHost::off;
    constexpr int clients_on_lane = 3;
    std::vector<std::future<Connection>> pending;
    for (int i = 0; i <= clients_on_lane; ++i) // the last one off the lane
        pending.push_back(std::async(std::launch::async, [&, i, port = server.port()] {
            return Connection::connect(test::at(port), i < clients_on_lane ? on : off, soon(60s));
        }));
    std::vector<Connection> ends;
    for (int i = 0; i <= clients_on_lane; ++i)
        ends.push_back(server.accept(soon(60s)));
    std::vector<Connection> clients;
    for (auto& f : pending)
        clients.push_back(f.get());

    std::map<Node*, int> nodes; // the server's Nodes, and how many clients each serves
    for (auto& e : ends)
        ++nodes[&e.node()];
    REQUIRE(nodes.size() == 2);
    Node* shared = std::max_element(nodes.begin(), nodes.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                   })->first;
    CHECK(nodes[shared] == clients_on_lane);

    // One registration on the shared Node; the Node of its own registers it again.
    auto table = shared->allocate(4096, Access::remote_read);
    test::fill_pattern(table->bytes(), 37);
    std::vector<std::shared_ptr<MemoryRegion>> kept;
    std::vector<Connection*> all;
    std::vector<RemoteRegion> offers;
    for (auto& e : ends) {
        all.push_back(&e);
        if (&e.node() == shared) {
            offers.push_back(table->remote());
        } else {
            kept.push_back(e.node().register_memory(table->bytes(), Access::remote_read));
            offers.push_back(kept.back()->remote());
        }
    }
    for (auto& cl : clients) {
        all.push_back(&cl);
        offers.push_back(kept.emplace_back(cl.allocate(8, Access::remote_read))->remote());
    }
    const auto learnt = test::exchange_all(all, offers);

    int on_lane = 0;
    for (std::size_t i = 0; i < clients.size(); ++i) {
        Connection& cl = clients[i];
        const RemoteRegion& r = learnt[ends.size() + i];
        const bool lane = cl.node().on_lane(cl.peer_id());
        on_lane += lane ? 1 : 0;
        CHECK(lane == (i < clients_on_lane));
        if (lane)
            CHECK(r.key() == table->remote().key()); // the one registration
        auto dst = cl.allocate(4096, Access::local);
        int ctx = 0;
        cl.read(dst->all(), r, 0, &ctx);
        (void)cl.wait(&ctx, soon());
        CHECK(std::memcmp(dst->data(), table->data(), 4096) == 0);
    }
    CHECK(on_lane == clients_on_lane);
}

namespace {

/// A stranger's connection to an abstract AF_UNIX name, as the lane's listener has.
int connect_abstract(const std::string& name)
{
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), len) != 0)
        throw std::runtime_error("cannot connect to the lane's listener");
    return fd;
}

} // namespace

TEST_CASE("lane node: strangers on a Node's lane listener, silent or speaking garbage, hold up no "
          "peer and are let go",
          "[lane][node]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    const Options o = test::options_for(shm_lane);
    auto a = Node::open(o);
    auto b = Node::open(o);
    const PeerId to_a = b->add_peer(a->address());
    const PeerId to_b = a->add_peer(b->address());
    const std::string& listener = a->address().same_host()->lane;
    const int silent = connect_abstract(listener);
    const int garbage = connect_abstract(listener);
    REQUIRE(::send(garbage, "GARBAGE!", 8, 0) == 8);
    a->progress(); // takes both: the garbage is refused at once, the silent one waits
    // The real peer is not held up.
    REQUIRE(a->on_lane(to_b));
    REQUIRE(b->on_lane(to_a));
    auto inbox = a->allocate(64, Access::remote_write);
    auto src = b->allocate(8, Access::local);
    int ctx = 0;
    b->write_notify(to_a, src->slice(0, 8), inbox->remote(), 0, 9, &ctx);
    (void)b->wait(&ctx, soon());
    CHECK(a->wait_for(Op::notify, soon()).data == 9);
    // A weft peer says hello as it connects: a connection silent for 5 s is
    // let go (the Node closes its end, and whatever it held with it).
    const auto hung_up = [](int fd) {
        pollfd p{fd, POLLRDHUP, 0};
        return ::poll(&p, 1, 0) == 1;
    };
    CHECK(hung_up(garbage));
    const auto until = Clock::now() + 8s;
    while (Clock::now() < until && !hung_up(silent)) {
        a->progress();
        std::this_thread::sleep_for(50ms);
    }
    CHECK(hung_up(silent));
    ::close(silent);
    ::close(garbage);
}
