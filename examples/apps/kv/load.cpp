// weft-kv-load: load on a KV node from client processes started together, each with
// `depth` operations in flight: keys uniform or Zipf, a GET/PUT mix, a value size. Every
// value read is checked (a value names its key and the PUT that wrote it, and its bytes
// follow from both); the run fails on one wrong value. Prints ops/s and p50/p99 latency,
// and one CSV line with --csv.
//   weft-kv-load HOST:PORT [HOST:PORT...] --clients 8 --depth 16 --ops 1000000 --value 4096 --get 0.9
// With several servers, each is a shard: a key lives on one, chosen by its hash.
// --connections N: each process has N connections to each server, polled in turn (as
// redis-benchmark -c N drives N connections from one process).
#include "kv_client.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

struct Config {
    std::vector<std::string> servers; // the shards: a key lives on servers[shard_of(key)]
    unsigned clients = 1, depth = 16;
    unsigned connections = 1; // to each server, per client process
    std::uint64_t ops = 100000, keys = 10000;
    std::uint32_t value = 64;
    double get = 0.9, zipf = 0; // zipf 0: uniform
    bool fill = true, csv = false;
    unsigned take = 16; // operations taken from a client per poll
};

/// Every key's name ("key:" and 12 digits) and shard (other bits of the name's hash than
/// its slot's), made once before the load starts: formatting and hashing a name on every
/// operation took a tenth of a client's time.
class KeyNames {
public:
    KeyNames(std::uint64_t keys, std::size_t shards) : names_(keys * width), shard_(keys)
    {
        for (std::uint64_t k = 0; k < keys; ++k) {
            fmt::format_to_n(names_.data() + k * width, width, "key:{:012}", k);
            shard_[k] = static_cast<std::uint32_t>((kv::hash(name(k)) >> 40) % shards);
        }
    }
    std::string_view name(std::uint64_t k) const { return {names_.data() + k * width, width}; }
    std::size_t shard(std::uint64_t k) const { return shard_[k]; }

private:
    static constexpr std::size_t width = 16; // keys < 10^12
    std::vector<char> names_;
    std::vector<std::uint32_t> shard_;
};

/// `cfg.connections` clients of every shard: server s's are [s * connections, (s + 1) * connections).
std::vector<std::unique_ptr<kv::Client>> connect_all(const Config& cfg)
{
    // Each client process polls its shards while it has operations in flight:
    // no progress thread beside it (on 2 cores it took CPU from the polling).
    weft::Options options;
    options.progress = weft::Progress::polling;
    std::vector<std::unique_ptr<kv::Client>> out;
    for (const std::string& s : cfg.servers)
        for (unsigned c = 0; c < cfg.connections; ++c)
            out.push_back(std::make_unique<kv::Client>(s, weft::Deadline::after(std::chrono::seconds(60)), options));
    return out;
}

/// Bytes 0, 1, ..., 255, 0, 1, ... : a value's bytes after its first 8 are a stretch of it.
std::span<const std::byte> ramp(std::size_t size)
{
    static std::vector<std::byte> bytes; // each client process is single-threaded
    for (std::size_t i = bytes.size(); i < size; ++i)
        bytes.push_back(static_cast<std::byte>(i));
    return std::span(bytes).first(size);
}

/// Where value_of(k, gen)'s byte 8 is in ramp(): byte i of the value is (base + i) mod 256.
std::size_t ramp_at(std::uint32_t k32, std::uint32_t gen)
{
    return static_cast<std::uint8_t>(k32 * 131 + gen * 7 + 8);
}

/// The value PUT number `gen` writes under key `k`: [k u32][gen u32][bytes of both].
void value_of(std::uint64_t k, std::uint32_t gen, std::span<std::byte> v)
{
    const auto k32 = static_cast<std::uint32_t>(k);
    std::memcpy(v.data(), &k32, 4);
    std::memcpy(v.data() + 4, &gen, 4);
    std::memcpy(v.data() + 8, ramp(256 + v.size()).data() + ramp_at(k32, gen), v.size() - 8);
}
/// Whether `v` is a value value_of() made for key `k` (of any generation): one memcmp
/// against the ramp (a loop over the bytes, vectorized, took a tenth of a 4 KiB GET's
/// client time), so that checking every value costs the load little.
bool value_is_right(std::uint64_t k, std::span<const std::byte> v, std::uint32_t size)
{
    if (v.size() != size)
        return false;
    std::uint32_t k32, gen;
    std::memcpy(&k32, v.data(), 4);
    std::memcpy(&gen, v.data() + 4, 4);
    if (k32 != static_cast<std::uint32_t>(k))
        return false;
    return std::memcmp(v.data() + 8, ramp(256 + v.size()).data() + ramp_at(k32, gen), v.size() - 8) == 0;
}

/// Keys drawn uniformly, or by Zipf's law with exponent `theta` (key 0 the hottest).
class Keys {
public:
    Keys(std::uint64_t n, double theta, std::uint64_t seed) : rng_(seed), uniform_(0, n - 1)
    {
        if (theta <= 0)
            return;
        cdf_.resize(n);
        double sum = 0;
        for (std::uint64_t i = 0; i < n; ++i)
            cdf_[i] = sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
        for (double& c : cdf_)
            c /= sum;
    }
    std::uint64_t next()
    {
        if (cdf_.empty())
            return uniform_(rng_);
        const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
        return static_cast<std::uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    }
    std::mt19937_64& rng() { return rng_; }

private:
    std::mt19937_64 rng_;
    std::uniform_int_distribution<std::uint64_t> uniform_;
    std::vector<double> cdf_;
};

struct Result {
    std::uint64_t ops = 0, wrong = 0, torn = 0;
    // On the steady clock, one for every process: the load's rate is its operations over the
    // span from the first begin to the last end, as redis-benchmark counts (short clients
    // taking turns on the cores overlap little: their own times would count twice).
    std::int64_t began_ns = 0, ended_ns = 0;
};

/// One client process: `ops` operations, `depth` at a time on each connection to each shard;
/// latencies in ns into `lat`.
Result run_client(const Config& cfg, std::uint64_t ops, std::uint64_t seed,
                  std::atomic<unsigned>& connected, int go_fd, std::span<std::uint32_t> lat)
{
    const auto shards = connect_all(cfg);
    ++connected;
    const unsigned depth = std::min(cfg.depth, shards[0]->depth());
    Keys keys(cfg.keys, cfg.zipf, seed);
    const KeyNames names(cfg.keys, cfg.servers.size());
    std::vector<bool> has_keys(cfg.servers.size()); // a shard no key maps to stays idle
    for (std::uint64_t k = 0; k < cfg.keys; ++k)
        has_keys[names.shard(k)] = true;
    const auto server_of = [&](std::size_t s) { return s / cfg.connections; }; // of connection s
    const bool crowded = cfg.clients >= std::thread::hardware_concurrency();
    struct Lane {
        std::uint64_t key;
        std::chrono::steady_clock::time_point start;
    };
    std::vector<Lane> lanes(shards.size() * depth); // connection s's lane l: s * depth + l
    std::vector<std::byte> value(cfg.value);
    char go;
    if (::read(go_fd, &go, 1) != 1) // all clients connected: start together
        throw std::runtime_error("the load's parent went away");
    Result r;
    std::uint64_t started = 0;
    using Clock = std::chrono::steady_clock;
    const auto start = [&](std::size_t s, std::uint32_t lane, Clock::time_point now) {
        std::uint64_t k = keys.next();
        while (names.shard(k) != server_of(s)) // a key of this shard, as the keys fall
            k = keys.next();
        lanes[s * depth + lane] = {k, now};
        if (std::uniform_real_distribution<double>(0, 1)(keys.rng()) < cfg.get) {
            shards[s]->start_get(lane, names.name(k));
        } else {
            value_of(k, static_cast<std::uint32_t>(keys.rng()()), value);
            shards[s]->start_put(lane, names.name(k), value);
        }
        ++started;
    };
    r.began_ns = Clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
    for (std::uint32_t l = 0; l < depth; ++l)
        for (std::size_t s = 0; s < shards.size() && started < ops; ++s)
            if (has_keys[server_of(s)])
                start(s, l, Clock::now());
    auto stall = weft::Deadline::after(std::chrono::seconds(30));
    std::array<kv::Client::Done, 16> done;
    while (r.ops < ops) {
        std::size_t found = 0;
        for (std::size_t s = 0; s < shards.size(); ++s) {
            const std::size_t n = shards[s]->poll(std::span(done).first(cfg.take));
            found += n;
            // One clock read for what one poll found: they ended by it, and the operations
            // started in their lanes begin with it (a read per operation and end took 4 %
            // of a client's time at 1 x 16).
            const auto now = n > 0 ? Clock::now() : Clock::time_point{};
            for (const kv::Client::Done& d : std::span(done).first(n)) {
                const Lane& l = lanes[s * depth + d.lane];
                lat[r.ops] = static_cast<std::uint32_t>(std::min<std::int64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now - l.start).count(), UINT32_MAX));
                ++r.ops;
                const bool right = d.kind == kv::Kind::get
                                       ? d.status == kv::Status::ok && value_is_right(l.key, d.value, cfg.value)
                                       : d.status == kv::Status::ok;
                r.wrong += !right;
                if (started < ops)
                    start(s, d.lane, now);
            }
        }
        if (found > 0)
            stall = weft::Deadline::after(std::chrono::seconds(30));
        else if (crowded)
            std::this_thread::yield(); // more clients than cores: let the others (and the server) run
        if (found == 0 && stall.expired())
            throw std::runtime_error(fmt::format("no operation finished in 30 s ({} of {} done)", r.ops, ops));
    }
    r.ended_ns = Clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
    for (const auto& c : shards)
        r.torn += c->torn();
    return r;
}

/// Every key PUT once (generation 0) on its shard, so that every GET finds its key.
void fill(Config cfg)
{
    cfg.connections = 1;
    const auto shards = connect_all(cfg);
    const KeyNames names(cfg.keys, shards.size());
    std::vector<std::byte> value(cfg.value);
    for (std::size_t s = 0; s < shards.size(); ++s) {
        kv::Client& c = *shards[s];
        std::uint64_t next = 0, done = 0, mine = 0;
        for (std::uint64_t k = 0; k < cfg.keys; ++k)
            mine += names.shard(k) == s;
        const auto put_next = [&](std::uint32_t lane) { // the next key of this shard, if any
            while (next < cfg.keys && names.shard(next) != s)
                ++next;
            if (next == cfg.keys)
                return;
            value_of(next, 0, value);
            c.start_put(lane, names.name(next), value);
            ++next;
        };
        for (std::uint32_t l = 0; l < c.depth(); ++l)
            put_next(l);
        std::array<kv::Client::Done, 16> got;
        auto stall = weft::Deadline::after(std::chrono::seconds(30));
        while (done < mine) {
            const std::size_t n = c.poll(got);
            if (n == 0 && stall.expired())
                throw std::runtime_error("filling the table: no PUT answered in 30 s");
            for (const auto& d : std::span(got).first(n)) {
                if (d.status != kv::Status::ok)
                    throw std::runtime_error(fmt::format(
                        "filling the table of {}: {} (give the server more slots)", cfg.servers[s],
                        kv::to_string(d.status)));
                ++done;
                stall = weft::Deadline::after(std::chrono::seconds(30));
                put_next(d.lane);
            }
        }
    }
}

} // namespace

int main(int argc, char** argv)
try {
    Config cfg;
    CLI::App app{"Load on a weft KV node from client processes started together"};
    app.add_option("servers", cfg.servers, "the KV servers' HOST:PORT, one per shard")->required();
    app.add_option("--clients", cfg.clients, "client processes")->check(CLI::Range(1u, 1024u));
    app.add_option("--depth", cfg.depth, "operations in flight per connection")->check(CLI::Range(1u, 1024u));
    app.add_option("--connections", cfg.connections,
                   "connections to each server per client process, polled in turn (redis-benchmark's "
                   "-c N is N connections from one process)")
        ->check(CLI::Range(1u, 64u));
    app.add_option("--ops", cfg.ops, "operations in all")->check(CLI::PositiveNumber);
    app.add_option("--keys", cfg.keys, "distinct keys")->check(CLI::Range(std::uint64_t{1}, std::uint64_t{999999999999}));
    app.add_option("--value", cfg.value, "value size in bytes")->check(CLI::Range(8u, 1u << 20));
    app.add_option("--get", cfg.get, "share of GETs (the rest are PUTs)")->check(CLI::Range(0.0, 1.0));
    app.add_option("--zipf", cfg.zipf, "Zipf exponent of the keys (0: uniform)")->check(CLI::Range(0.0, 5.0));
    app.add_flag("!--no-fill", cfg.fill, "do not PUT every key first");
    app.add_flag("--csv", cfg.csv, "print one CSV line");
    app.add_option("--take", cfg.take, "operations taken from a client per poll (the rest wait for the next)")
        ->check(CLI::Range(1u, 16u));
    CLI11_PARSE(app, argc, argv);
    if (cfg.fill) { // in a child: libfabric set up in this process would be copied into the clients
        const pid_t pid = ::fork();
        if (pid == 0) {
            try {
                fill(cfg);
                ::_exit(0);
            } catch (const std::exception& e) {
                std::cerr << "weft-kv-load: " << e.what() << std::endl;
                ::_exit(1);
            }
        }
        int status = 0;
        if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
    }

    // Each client a process. They share one anonymous mapping: a count of those connected,
    // each one's result, and every latency; a pipe starts them together.
    const std::size_t at_results = 64, at_lat = (at_results + cfg.clients * sizeof(Result) + 63) / 64 * 64;
    const std::size_t bytes = at_lat + cfg.ops * 4;
    void* shared = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int go[2];
    if (shared == MAP_FAILED || ::pipe(go) != 0)
        throw std::runtime_error("cannot share memory with the clients, or make a pipe");
    auto* connected = new (shared) std::atomic<unsigned>(0);
    auto* results = new (static_cast<std::byte*>(shared) + at_results) Result[cfg.clients];
    auto* lat = reinterpret_cast<std::uint32_t*>(static_cast<std::byte*>(shared) + at_lat);
    std::vector<pid_t> kids;
    std::vector<std::uint64_t> first(cfg.clients + 1, 0); // client i's latencies: [first[i], first[i + 1])
    for (unsigned i = 0; i < cfg.clients; ++i) {
        const std::uint64_t share = cfg.ops / cfg.clients + (i < cfg.ops % cfg.clients);
        first[i + 1] = first[i] + share;
        const pid_t pid = ::fork();
        if (pid < 0)
            throw std::runtime_error("fork failed: " + std::string(std::strerror(errno)));
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL); // the load killed: its clients too
            ::close(go[1]);
            try {
                results[i] = run_client(cfg, share, 1000 + i, *connected, go[0],
                                        std::span(lat + first[i], share));
                ::_exit(0);
            } catch (const std::exception& e) {
                std::cerr << "client " << i << ": " << e.what() << std::endl;
                ::_exit(1);
            }
        }
        kids.push_back(pid);
    }
    ::close(go[0]);
    for (const auto until = weft::Deadline::after(std::chrono::seconds(60));
         *connected < cfg.clients && !until.expired();)
        ::usleep(1000);
    const std::string start(cfg.clients, 'g');
    (void)!::write(go[1], start.data(), start.size()); // a client that failed to connect exits anyway
    ::close(go[1]);
    int failed = 0;
    for (const pid_t k : kids) {
        int status = 0;
        ::waitpid(k, &status, 0);
        failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    Result all;
    std::int64_t began = INT64_MAX, ended = 0;
    for (unsigned i = 0; i < cfg.clients; ++i) {
        all.ops += results[i].ops;
        all.wrong += results[i].wrong;
        all.torn += results[i].torn;
        if (results[i].ended_ns > 0) {
            began = std::min(began, results[i].began_ns);
            ended = std::max(ended, results[i].ended_ns);
        }
    }
    const double seconds = ended > began ? static_cast<double>(ended - began) / 1e9 : 0;
    std::vector<std::uint32_t> sorted; // what each client measured (a failed one: its part)
    for (unsigned i = 0; i < cfg.clients; ++i)
        sorted.insert(sorted.end(), lat + first[i], lat + first[i] + results[i].ops);
    std::sort(sorted.begin(), sorted.end());
    const auto pct = [&](double p) {
        return sorted.empty() ? 0.0 : sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))] / 1000.0;
    };
    const double rate = seconds > 0 ? static_cast<double>(all.ops) / seconds : 0;
    if (cfg.csv)
        fmt::print("clients,depth,value,get,zipf,ops,seconds,ops_per_s,p50_us,p99_us,wrong,torn,failed\n"
                   "{},{},{},{},{},{},{:.3f},{:.0f},{:.2f},{:.2f},{},{},{}\n",
                   cfg.clients, cfg.depth, cfg.value, cfg.get, cfg.zipf, all.ops, seconds, rate,
                   pct(0.5), pct(0.99), all.wrong, all.torn, failed);
    else
        fmt::print("{} ops by {} clients{} x {} deep in {:.2f} s: {:.0f} ops/s, p50 {:.1f} us, p99 {:.1f} us; "
                   "{} wrong, {} torn copies read again{}\n",
                   all.ops, cfg.clients,
                   cfg.connections > 1 ? fmt::format(" of {} connections each", cfg.connections) : "",
                   cfg.depth, seconds, rate, pct(0.5), pct(0.99), all.wrong,
                   all.torn, failed ? fmt::format(", {} clients FAILED", failed) : "");
    return all.wrong == 0 && failed == 0 && all.ops == cfg.ops ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "weft-kv-load: " << e.what() << "\n";
    return 1;
}
