// SPDX-License-Identifier: MIT
// The KV node (examples/apps/kv) as its users run it: weft-kv-server as a process,
// the lesson's weft-kv-client, and weft-kv-load's client processes, which check
// every value they read (a value names its key and the PUT that wrote it) and
// exit 1 on one wrong value. On tcp, shm and tcp;ofi_rxm.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kv_client.hpp"
#include "support/process.hpp"
#include "support/sockets.hpp"

using namespace std::chrono_literals;
using weft::test::Command;
using weft::test::Process;

namespace {

/// A KV server on a free port with `provider` chosen (WEFT_PROVIDER), until destroyed.
class KvServer {
public:
    explicit KvServer(std::string provider, std::uint32_t slots = 1u << 14,
                      std::uint32_t value_max = 4096)
        : provider_(std::move(provider))
        , port_(weft::test::free_port())
        , p_(Command{{WEFT_KV_SERVER_PATH, std::to_string(port_), std::to_string(slots),
                      std::to_string(value_max)},
                     env()},
             "kv-server")
    {
        if (!p_.wait_for_output("listening on port", 30s))
            throw std::runtime_error("the KV server did not start: " + p_.output());
    }
    ~KvServer() { p_.stop(10s); }
    /// Stops it (SIGTERM): its exit status (0: it ended cleanly; under the sanitizers, also
    /// nothing leaked).
    int stop()
    {
        p_.stop(30s);
        return p_.status();
    }
    std::string at() const { return fmt::format("127.0.0.1:{}", port_); }
    std::vector<std::string> env() const { return {"WEFT_PROVIDER=" + provider_}; }
    Process& process() { return p_; }

private:
    std::string provider_;
    std::uint16_t port_;
    Process p_;
};

struct Load {
    int status;
    std::string output;
    std::uint64_t wrong = ~0ull, torn = 0, ops = 0;
};

/// What weft-kv-load printed, its CSV line read back.
Load read_load(const weft::test::Ran& r)
{
    Load l{r.status, r.output};
    // clients,depth,value,get,zipf,ops,seconds,ops_per_s,p50_us,p99_us,wrong,torn,failed
    std::smatch m;
    static const std::regex line(R"((\d+),(\d+),(\d+),[\d.]+,[\d.]+,(\d+),[\d.]+,\d+,[\d.]+,[\d.]+,(\d+),(\d+),(\d+))");
    if (std::regex_search(l.output, m, line)) {
        l.ops = std::stoull(m[4]);
        l.wrong = std::stoull(m[5]);
        l.torn = std::stoull(m[6]);
    }
    return l;
}

/// Whether a load ran all its `ops` operations, every value right (its output shown when not).
void check_all_right(const Load& l, std::uint64_t ops)
{
    INFO(l.output);
    CHECK(l.status == 0);
    CHECK(l.ops == ops);
    CHECK(l.wrong == 0);
}

/// weft-kv-load on `servers` (each a shard) with `args`.
Load load(const std::vector<const KvServer*>& servers, std::vector<std::string> args)
{
    std::vector<std::string> argv{WEFT_KV_LOAD_PATH};
    for (const KvServer* s : servers)
        argv.push_back(s->at());
    argv.push_back("--csv");
    argv.insert(argv.end(), args.begin(), args.end());
    return read_load(weft::test::run(Command{argv, servers[0]->env()}, 300s, "kv-load"));
}
Load load(const KvServer& s, std::vector<std::string> args) { return load({&s}, std::move(args)); }

} // namespace

TEST_CASE("kv: the lesson's client puts, gets and deletes a key, a missing key is not found",
          "[kv][app][process]")
{
    KvServer s("tcp");
    const auto client = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {WEFT_KV_CLIENT_PATH, s.at()});
        return weft::test::run(Command{args, s.env()}, 60s, "kv-client");
    };
    auto r = client({"put", "colour", "teal"});
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("put colour: ok") != std::string::npos);
    r = client({"get", "colour"});
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("colour = teal") != std::string::npos);
    r = client({"put", "colour", "ochre"}); // in place
    CHECK(r.status == 0);
    r = client({"get", "colour"});
    CHECK(r.output.find("colour = ochre") != std::string::npos);
    r = client({"del", "colour"});
    CHECK(r.status == 0);
    r = client({"get", "colour"});
    INFO(r.output);
    CHECK(r.status == 3);
    CHECK(r.output.find("colour: not found") != std::string::npos);
    r = client({"del", "colour"});
    CHECK(r.status == 3);
    CHECK(r.output.find("del colour: not found") != std::string::npos);
}

TEST_CASE("kv: 8 client processes 16 deep, GETs and PUTs of 4 KiB values, every value right, "
          "on tcp, shm and ofi_rxm over tcp",
          "[kv][app][process]")
{
    const std::string provider = GENERATE(as<std::string>{}, "tcp", "shm", "tcp;ofi_rxm");
    INFO(provider);
    KvServer s(provider);
    const Load l = load(s, {"--clients", "8", "--depth", "16", "--ops", "40000", "--keys", "4000",
                            "--value", "4096", "--get", "0.8", "--zipf", "0.99"});
    INFO("the server said: " << s.process().output());
    check_all_right(l, 40000);
    // One operation taken per poll: a batch's other lanes wait in the client for the
    // next polls, none lost or reported twice (kv::Client refuses a completion for a
    // lane with nothing in flight).
    const Load one = load(s, {"--clients", "2", "--depth", "16", "--ops", "20000", "--keys", "4000",
                              "--value", "4096", "--get", "0.9", "--take", "1", "--no-fill"});
    check_all_right(one, 20000);
    // The clients gone, the server sleeps (or naps, on shm): over 2 s it takes a fraction of
    // the 2 s one spinning core would.
    std::this_thread::sleep_for(300ms); // its clients swept
    const double before = s.process().cpu_seconds();
    std::this_thread::sleep_for(2s);
    const double idle = s.process().cpu_seconds() - before;
    INFO("idle, the server used " << idle << " s of CPU in 2 s");
    CHECK(idle < 0.4);
}

TEST_CASE("kv: 64 client processes 16 deep, batch after batch: every value right, the server "
          "keeps no descriptor or thread of a batch that left",
          "[kv][app][process]")
{
    KvServer s("tcp");
    const auto count = [&](const char* dir) { // entries of /proc/PID/DIR
        std::size_t n = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(
                 fmt::format("/proc/{}/{}", s.process().pid(), dir)))
            ++n;
        return n;
    };
    // The server drops a client as its side channel closes: counts that held for 300 ms.
    const auto settled = [&] {
        auto last = std::pair{count("fd"), count("task")};
        for (auto until = std::chrono::steady_clock::now() + 10s;
             std::chrono::steady_clock::now() < until;) {
            std::this_thread::sleep_for(300ms);
            const auto now = std::pair{count("fd"), count("task")};
            if (now == last)
                break;
            last = now;
        }
        return last;
    };
    std::pair<std::size_t, std::size_t> after_first;
    for (int batch = 0; batch < 3; ++batch) {
        INFO("batch " << batch);
        const Load l = load(s, {"--clients", "64", "--depth", "16", "--ops", "64000", "--keys",
                                "4000", "--value", "1024", "--get", "0.9", "--zipf", "0.99"});
        check_all_right(l, 64000);
        if (batch == 0)
            after_first = settled();
        else
            CHECK(settled() == after_first); // descriptors, threads
    }
    CHECK(s.stop() == 0);
}

TEST_CASE("kv: a GET starts where its key was last found: a key moved, deleted or crowded out "
          "since is found at its new place, or not at all",
          "[kv][app][process]")
{
    // 4 KiB values: one slot a read. In 8 slots, three keys of one home h:
    // a at h, b at h + 1, c at h + 2 (k0, k24 and k38; their entries in the
    // client's location cache, 737, 841 and 686 of 1 024, are apart).
    constexpr std::uint32_t slots = 8;
    const auto home = [](const std::string& k) { return kv::hash(k) % slots; };
    std::vector<std::string> same;
    for (int i = 0; same.size() < 3; ++i)
        if (const std::string k = fmt::format("k{}", i); home(k) == home("k0"))
            same.push_back(k);
    const std::string &a = same[0], &b = same[1], &c = same[2];
    const auto bytes = [](std::string_view v) { return std::as_bytes(std::span(v)); };
    const auto text = [](const std::optional<std::vector<std::byte>>& v) {
        return v ? std::string(reinterpret_cast<const char*>(v->data()), v->size()) : "(not found)";
    };
    for (const char* provider : {"tcp", "shm"}) {
        INFO(provider);
        KvServer s(provider, slots, 4096);
        weft::Options o;
        o.provider = provider;
        o.allow_shm = o.provider == "shm";
        o.progress = weft::Progress::polling;
        const auto soon = [] { return weft::Deadline::after(20s); };
        kv::Client kv(s.at(), soon(), o);
        const auto reads_of = [&](const std::string& key) {
            const std::uint64_t before = kv.reads();
            const std::string v = text(kv.get(key, soon()));
            return fmt::format("{} in {} reads", v, kv.reads() - before);
        };
        for (const auto& [k, v] : {std::pair(a, "A"), std::pair(b, "B"), std::pair(c, "C")})
            REQUIRE(kv.put(k, bytes(v), soon()) == kv::Status::ok);

        CHECK(reads_of(c) == "C in 3 reads"); // h, h + 1, h + 2
        CHECK(reads_of(c) == "C in 1 reads"); // where it was
        CHECK(reads_of(b) == "B in 2 reads");

        // c moves to h (the first free slot from its home): h + 2 holds a deleted c.
        REQUIRE(kv.erase(a, soon()) == kv::Status::ok);
        REQUIRE(kv.erase(c, soon()) == kv::Status::ok);
        REQUIRE(kv.put(c, bytes("C2"), soon()) == kv::Status::ok);
        CHECK(reads_of(c) == "C2 in 2 reads"); // h + 2, then h
        CHECK(reads_of(c) == "C2 in 1 reads");

        // b deleted: its old place holds a deleted b (the guess: one read), then the walk
        // from h to the unused h + 3 (four).
        REQUIRE(kv.erase(b, soon()) == kv::Status::ok);
        CHECK(reads_of(b) == "(not found) in 5 reads");

        // A GET that found nothing keeps no guess. b, put again, lands at the first free
        // slot (h + 1); then deleted, and another key in its place.
        REQUIRE(kv.put(b, bytes("B2"), soon()) == kv::Status::ok);
        CHECK(reads_of(b) == "B2 in 2 reads");
        REQUIRE(kv.erase(b, soon()) == kv::Status::ok);
        REQUIRE(kv.put(a, bytes("A2"), soon()) == kv::Status::ok); // a at h + 1 now
        CHECK(reads_of(b) == "(not found) in 5 reads");
        CHECK(reads_of(a) == "A2 in 2 reads");
        CHECK(s.stop() == 0);
    }
}

TEST_CASE("kv: GETs racing PUTs of the same 10 keys never return a torn value: torn copies are "
          "read again",
          "[kv][app][process]")
{
    // On shm a GET is the client's own copy out of the server's memory
    // (process_vm_readv) while the server rewrites the slot: copies are torn,
    // and the versions and CRC must catch every one.
    KvServer s("shm");
    std::uint64_t torn = 0;
    for (int run = 0; run < 3 && torn == 0; ++run) {
        const Load l = load(s, {"--clients", "4", "--depth", "16", "--ops", "60000", "--keys", "10",
                                "--value", "4096", "--get", "0.5"});
        INFO(l.output);
        REQUIRE(l.status == 0);
        REQUIRE(l.wrong == 0);
        torn += l.torn;
    }
    CHECK(torn > 0); // the race happened: the check was put to work
}

TEST_CASE("kv: small slots are read two at a time: crowded keys probed past their home and "
          "across the table's end, racing PUTs, every value right",
          "[kv][app][process]")
{
    // 64 B values make 192 B slots, which a GET reads two at a time. 20 keys
    // in 28 slots (kv::hash of key:000000000000 on), filled in key order: 4 sit
    // one past their home, two 3 past (one of them across the table's end),
    // and one starts its read at the last slot.
    for (const char* provider : {"shm", "tcp"}) {
        KvServer s(provider, 28, 64);
        const Load l = load(s, {"--clients", "4", "--depth", "8", "--ops", "40000", "--keys", "20",
                                "--value", "64", "--get", "0.5"});
        INFO(provider);
        check_all_right(l, 40000);
        CHECK(s.stop() == 0);
    }
}

TEST_CASE("kv: a client killed mid-load leaves the server serving the others",
          "[kv][app][process][faults]")
{
    KvServer s("tcp");
    std::vector<std::string> argv{WEFT_KV_LOAD_PATH, s.at(), "--clients", "2", "--ops", "100000000",
                                  "--keys", "1000", "--value", "1024", "--get", "0.5"};
    Process victim(Command{argv, s.env()}, "kv-victim");
    std::this_thread::sleep_for(1s); // it is in the middle of its load
    victim.signal(SIGKILL);
    (void)victim.finish(10s);
    const Load l = load(s, {"--clients", "2", "--ops", "20000", "--keys", "1000", "--value", "1024",
                            "--get", "0.5"});
    INFO(l.output);
    CHECK(l.status == 0);
    CHECK(l.wrong == 0);
    CHECK(s.stop() == 0);
    INFO(s.process().output());
    CHECK(s.process().output().find("served ") != std::string::npos);
}

TEST_CASE("kv: three servers as shards, each key on one, through one connection or two from each "
          "process: every value right, every shard serves",
          "[kv][app][process]")
{
    std::vector<std::unique_ptr<KvServer>> shards;
    std::vector<const KvServer*> at;
    for (int s = 0; s < 3; ++s)
        at.push_back(shards.emplace_back(std::make_unique<KvServer>("tcp")).get());
    const Load l = load(at, {"--clients", "3", "--depth", "8", "--ops", "30000", "--keys", "3000",
                             "--value", "512", "--get", "0.7"});
    check_all_right(l, 30000);
    // Two connections to each shard from each process, polled in turn.
    const Load two = load(at, {"--clients", "2", "--connections", "2", "--depth", "4", "--ops", "20000",
                               "--keys", "3000", "--value", "512", "--get", "0.7", "--no-fill"});
    check_all_right(two, 20000);
    for (auto& s : shards) {
        CHECK(s->stop() == 0);
        const std::string said = s->process().output();
        INFO(said);
        const auto served = said.find("served ");
        REQUIRE(served != std::string::npos);
        CHECK(std::stoull(said.substr(served + 7)) > 500); // its share of the fill and the PUTs
    }
}
