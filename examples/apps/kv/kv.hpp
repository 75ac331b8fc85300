// The KV node's table and its client, shared by weft-kv-server, weft-kv-client and
// weft-kv-load. The server keeps a hash table of fixed-size slots in registered memory;
// a client GETs with one RMA read of a key's slot (the server's CPU takes no part), and
// sends PUT and DELETE to the server, which applies them and answers with a message.
//
// A slot (every integer little-endian, as the machines here are):
//   0   u64 version: odd while the server rewrites the slot
//   8   u32 CRC-32C of the version, state, lengths, key and value
//   12  u8  state: 0 never used, 1 holds a key, 2 deleted (a probe goes on past it)
//   14  u16 key length          16  u32 value length
//   24  key (key_max bytes), then the value (value_max bytes)
//   end u64 version again
// An RMA read is not atomic, nor in any order: it may see a slot half rewritten. A copy whose
// two versions differ, or are odd, or whose CRC does not match, is torn; the client reads it
// again. The CRC is the last word: a torn copy passes only if its CRC collides (2^-32). A key
// lives within `probe_max` slots of its home (hash % slots), probed in order.
#pragma once

#include <weft/weft.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kv {

enum class Op : std::uint8_t { put = 1, erase = 2 };
enum class Status : std::uint8_t { ok, not_found, full, bad_request };
inline const char* to_string(Status s)
{
    constexpr const char* names[] = {"ok", "not found", "full around the key's home", "bad request"};
    return names[static_cast<int>(s)];
}

constexpr std::uint32_t probe_max = 16;
constexpr std::size_t head_size = 24;
enum class State : std::uint8_t { unused, full, deleted };

/// The table's shape, sent by the server to each client with its regions.
struct Geometry {
    std::uint32_t slots = 1u << 16;
    std::uint32_t key_max = 64;
    std::uint32_t value_max = 4096;
    std::uint32_t depth = 16; ///< requests a client may have in flight
    std::size_t slot_size() const { return (head_size + key_max + value_max + 8 + 63) / 64 * 64; }
    std::size_t request_size() const { return 8 + key_max + value_max; }
};

/// FNV-1a, then MurmurHash3's finalizer: FNV's low bits alone crowd keys that differ in
/// their last characters (key:000000000000 on) into runs of neighbouring slots (4 000 such
/// keys in 16 384 slots: 1.32 slots a GET looked at, 1.18 with the finalizer).
inline std::uint64_t hash(std::string_view key)
{
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : key)
        h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 33)) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

inline std::uint64_t load64(const std::byte* p)
{
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

/// One slot's bytes (the server's table, or a client's copy of it).
struct Slot {
    std::byte* p;
    const Geometry& g;

    std::uint64_t version() const { return load64(p); }
    std::uint64_t tail() const { return load64(p + g.slot_size() - 8); }
    std::uint32_t crc() const { return static_cast<std::uint32_t>(load64(p + 8)); }
    State state() const { return static_cast<State>(p[12]); }
    std::uint16_t key_len() const { return static_cast<std::uint16_t>(load64(p + 14)); }
    std::uint32_t value_len() const { return static_cast<std::uint32_t>(load64(p + 16)); }
    std::string_view key() const { return {reinterpret_cast<const char*>(p + head_size), key_len()}; }
    std::span<const std::byte> value() const { return {p + head_size + g.key_max, value_len()}; }

    std::uint32_t checksum(std::uint64_t v) const
    {
        std::uint32_t c = weft::crc32c(std::as_bytes(std::span(&v, 1)));
        c = weft::crc32c_extend(c, std::span<const std::byte>(p + 12, 12)); // state, lengths
        c = weft::crc32c_extend(c, std::as_bytes(std::span(key().data(), key().size())));
        return weft::crc32c_extend(c, value());
    }
    /// A copy that is whole: both versions equal and even, lengths in range, CRC right;
    /// or a slot never written (version 0: unused, whatever else a torn copy shows).
    bool whole() const
    {
        if (version() != tail() || version() % 2 != 0)
            return false;
        if (version() == 0)
            return state() == State::unused;
        return key_len() <= g.key_max && value_len() <= g.value_max &&
               state() <= State::deleted && crc() == checksum(version());
    }

    /// The server's rewrite, seen by readers as torn until it is done.
    void rewrite(State s, std::string_view key, std::span<const std::byte> value)
    {
        const std::uint64_t v = version();
        store_versions(v + 1);
        std::atomic_thread_fence(std::memory_order_release); // the odd versions before any byte
        p[12] = static_cast<std::byte>(s);
        const auto klen = static_cast<std::uint16_t>(key.size());
        const auto vlen = static_cast<std::uint32_t>(value.size());
        std::memcpy(p + 14, &klen, 2);
        std::memcpy(p + 16, &vlen, 4);
        std::memcpy(p + head_size, key.data(), key.size());
        if (!value.empty())
            std::memcpy(p + head_size + g.key_max, value.data(), value.size());
        const std::uint32_t c = checksum(v + 2);
        std::memcpy(p + 8, &c, 4);
        store_versions(v + 2);
    }

private:
    void store_versions(std::uint64_t v)
    {
        // Release: the bytes before it are written first. A copy taken while
        // they change has an odd or unequal version, or a CRC that fails.
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p + g.slot_size() - 8))
            .store(v, std::memory_order_release);
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p))
            .store(v, std::memory_order_release);
    }
};

/// What the server tells a client at connect: the shape and both regions.
struct Hello {
    Geometry g;
    weft::RemoteRegion table, requests;

    std::vector<std::byte> encode() const
    {
        std::vector<std::byte> b(16);
        std::memcpy(b.data(), &g.slots, 4);
        std::memcpy(b.data() + 4, &g.key_max, 4);
        std::memcpy(b.data() + 8, &g.value_max, 4);
        std::memcpy(b.data() + 12, &g.depth, 4);
        for (const auto& r : {table, requests}) {
            const auto e = r.encode();
            b.insert(b.end(), e.begin(), e.end());
        }
        return b;
    }
    static Hello decode(std::span<const std::byte> b)
    {
        const std::size_t r = weft::RemoteRegion::wire_size;
        if (b.size() != 16 + 2 * r)
            throw std::runtime_error("not a KV server's hello (" + std::to_string(b.size()) + " B)");
        Hello h;
        std::memcpy(&h.g.slots, b.data(), 4);
        std::memcpy(&h.g.key_max, b.data() + 4, 4);
        std::memcpy(&h.g.value_max, b.data() + 8, 4);
        std::memcpy(&h.g.depth, b.data() + 12, 4);
        h.table = weft::RemoteRegion::decode(b.subspan(16, r));
        h.requests = weft::RemoteRegion::decode(b.subspan(16 + r, r));
        return h;
    }
};

/// The server's answer to a request: which lane, and how it went.
struct Reply {
    std::uint32_t lane;
    Status status;
};

} // namespace kv
