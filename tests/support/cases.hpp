// SPDX-License-Identifier: MIT
// The provider matrix: which (provider, endpoint kind) cells exist, whether this
// machine can run them, and a connected pair for a cell.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "support/pattern.hpp"
#include "weft/weft.hpp"

namespace weft::test {

struct Case {
    std::string provider; ///< as given to Options::provider
    EndpointKind kind;
    /// SameHost::lane: weft's same-host lane carries what the provider would
    /// (both ends are on this host); label "PROVIDER/KIND+lane".
    SameHost same_host = SameHost::off;
    std::string label() const;
};

/// Every cell of the matrix. WEFT_TEST_PROVIDERS (comma list of labels such as
/// "tcp/MSG,shm/RDM") narrows it.
std::vector<Case> matrix();

/// Options for a cell: provider, kind, shm allowed, bound to the test address
/// (WEFT_TEST_ADDR, default 127.0.0.1; the fabric lab sets the device's IP).
Options options_for(const Case& c, Options base = {});

/// A domain of the cell's provider, opened as options_for(c, base) selects it.
std::shared_ptr<Domain> domain_for(const Case& c, const Options& base = {});

/// Why this cell cannot run here, or nothing when it can.
std::optional<std::string> unavailable(const Case& c, const Options& base = {});

/// Two connected ends in this process: `server` accepted, `client` connected.
struct Pair {
    /// Regions the server exposes outlive both endpoints (destroyed last): a
    /// target's provider may still touch them after the initiator's operation
    /// completed (tcp in libfabric 1.17 does, measured under ASan).
    std::vector<std::shared_ptr<MemoryRegion>> exposed;
    Connection server;
    Connection client;

    std::shared_ptr<MemoryRegion> expose(std::size_t size, Access access)
    {
        return exposed.emplace_back(server.allocate(size, access));
    }

    /// What an RMA test works on: `size` bytes the server exposes (`target`,
    /// and its descriptor at the client), a source and a sink as large at the
    /// client. auto [target, remote, src, back] = p.rma(size);
    struct Rma {
        std::shared_ptr<MemoryRegion> target;
        RemoteRegion remote;
        std::shared_ptr<MemoryRegion> src;
        std::shared_ptr<MemoryRegion> back;
    };
    Rma rma(std::size_t size, Access target_access = Access::remote_read_write)
    {
        auto target = expose(size, target_access);
        return {target, target->remote(), client.allocate(size, Access::local),
                client.allocate(size, Access::local)};
    }
};
Pair connect_pair(const Case& c, const Options& base = {});
/// One more connection to `server` (options as options_for gives them).
Pair connect_pair(Server& server, const Options& o);
/// A client's Options for `server`, from the server's `o`: the server decides
/// the provider; shm allowed only where the server chose it (else allowing it
/// would be named on stderr).
Options client_options(const Server& server, Options o);

/// Every connection in `ends` offers the region at the same index of
/// `offers` and learns its peer's, all at once (a thread each: both ends of a
/// connection may be in `ends`); what each learnt.
std::vector<RemoteRegion> exchange_all(const std::vector<Connection*>& ends,
                                       const std::vector<RemoteRegion>& offers);

/// `n` Nodes like `hub` (options `o`), each added as a peer of it: `nodes[i]`
/// is the hub's peer `ids[i]`. Addresses are exchanged in-process here (a
/// store or a server does it across processes); each node adds the hub when it
/// first uses it (RDM wants both sides to add each other).
struct Peers {
    std::vector<std::shared_ptr<Node>> nodes;
    std::vector<PeerId> ids;
};
Peers peers_of(Node& hub, const Options& o, std::size_t n);

/// The address tests bind to.
std::string test_address();
/// "ADDRESS:port" at the test address: where a server on `port` is reached.
std::string at(std::uint16_t port);

/// In a TEST_CASE: the case runs once per matrix cell (a Catch2 generator).
inline Case each_cell()
{
    static const auto cells = matrix();
    return cells[GENERATE_COPY(range(std::size_t{0}, cells.size()))];
}

inline Deadline soon(std::chrono::seconds s = std::chrono::seconds(20))
{
    return Deadline::after(s);
}


/// Keeps objects a thread stuck inside the provider may still touch alive and
/// reachable for the rest of the process (no leak report), and lets the
/// FidLeakCheck listener accept their open libfabric objects.
void bury(std::shared_ptr<void> p);
/// How many objects were buried in this process.
std::size_t buried() noexcept;

/// A passive end in a thread of its own while the test drives the others.
/// `body` gets a flag that turns true once the test is done with it (a
/// target keeps progressing until then). finish(), or the destructor when
/// the test throws, sets the flag, joins, and returns the body's error text
/// (empty when it had none).
class Target {
public:
    template <class Body>
    explicit Target(Body body)
        : thread_([this, body = std::move(body)]() mutable {
              try {
                  body(static_cast<const std::atomic<bool>&>(done_));
              } catch (const std::exception& e) {
                  error_ = e.what();
              }
          })
    {
    }
    ~Target() { (void)finish(); }
    Target(const Target&) = delete;
    Target& operator=(const Target&) = delete;
    std::string finish()
    {
        done_ = true;
        if (thread_.joinable())
            thread_.join();
        return error_;
    }

private:
    std::atomic<bool> done_{false};
    std::string error_;
    std::thread thread_; // last: starts once the members it uses exist
};

} // namespace weft::test

/// In a TEST_CASE: `c` is each matrix cell in turn (each_cell()); a cell
/// that cannot run here is skipped, saying why; what fails names the cell.
#define WEFT_EACH_CELL(c)                                                                    \
    const auto c = ::weft::test::each_cell();                                                \
    WEFT_REQUIRE_CELL(c);                                                                    \
    INFO((c).label())

/// Skips the current test (with a visible message) when the cell cannot run.
#define WEFT_REQUIRE_CELL(c, ...)                                                            \
    do {                                                                                     \
        if (auto why_ = ::weft::test::unavailable((c), ##__VA_ARGS__)) {                     \
            WARN("SKIPPED " << (c).label() << ": " << *why_);                                \
            return;                                                                          \
        }                                                                                    \
    } while (0)
