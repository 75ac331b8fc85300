// SPDX-License-Identifier: MIT
// The TCP store's requests and answers (tcp_store.cpp sends them,
// store_server.cpp serves them), each the payload of one side-channel frame.
//
//   request (detail::Frame::store):        id u32, op u8, wait_ms u32, key (u32 length
//                                  + bytes), then by op: set, set_owned: value (u32 length
//                                  + bytes); add: delta (i64 as u64); contains_each,
//                                  get_each: count u32, then each key (`key` is empty)
//   answer (detail::Frame::store_answer):  id u32, status u8, then by op: get: value;
//                                  add: the sum (i64 as u64); contains_each: one byte
//                                  per key asked, 1 where it exists (u32 length + bytes);
//                                  get_each: for each key, u8 1 and its value, u8 0
//                                  (absent) or u8 2 (there, but the answer was full:
//                                  ask again); all of it as one u32 length + bytes
//
// A get whose key is absent is parked at the server for up to wait_ms; its
// answer is then `absent`. Answers carry the request's id, so that a member
// whose own deadline passed first skips the late answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire.hpp"

namespace weft::detail::store {

enum class Op : std::uint8_t {
    set = 1,
    get = 2,
    add = 3,
    contains = 4,
    erase = 5,
    set_owned = 6, // set, and erased when the setter's connection closes
    contains_each = 7, // contains() of many keys in one request (a group's departure check)
    get_each = 8,      // the values of many keys there now, in one request (a multi-get)
};

/// A get_each answer's mark of each key.
enum class Each : std::uint8_t { absent = 0, value = 1, ask_again = 2 };
/// The values a get_each answer carries at most; a key whose value would
/// pass it is ask_again (one larger than it alone: read it with a get).
constexpr std::size_t get_each_budget = 512 * 1024;

/// Whether a request carries a list of keys.
inline bool has_keys(Op op) { return op == Op::contains_each || op == Op::get_each; }
enum class Status : std::uint8_t {
    ok = 0,
    absent = 1,
    not_a_number = 2, // add() on a key whose value is not a decimal integer
};

struct Request {
    std::uint32_t id = 0;
    Op op = Op::get;
    std::uint32_t wait_ms = 0;
    std::string key;
    std::vector<std::byte> value; // set
    std::int64_t delta = 0;       // add
    std::vector<std::string> keys; // contains_each, get_each
};

inline std::vector<std::byte> encode(const Request& r)
{
    wire::Writer w;
    w.u32(r.id);
    w.u8(static_cast<std::uint8_t>(r.op));
    w.u32(r.wait_ms);
    w.str(r.key);
    if (r.op == Op::set || r.op == Op::set_owned)
        w.bytes(r.value);
    else if (r.op == Op::add)
        w.i64(r.delta);
    else if (has_keys(r.op)) {
        w.u32(static_cast<std::uint32_t>(r.keys.size()));
        for (const std::string& k : r.keys)
            w.str(k);
    }
    return w.data();
}

inline Request decode_request(std::span<const std::byte> payload)
{
    wire::Reader in(payload, "store request", "TCP store");
    Request r;
    r.id = in.u32();
    const auto op = in.u8();
    if (op < static_cast<std::uint8_t>(Op::set) ||
        op > static_cast<std::uint8_t>(Op::get_each))
        throw Error("store", -EPROTO, "",
                    "a store request has an unknown operation " + std::to_string(op) +
                        ": the member is not a weft program of this version");
    r.op = static_cast<Op>(op);
    r.wait_ms = in.u32();
    r.key = in.str();
    if (r.op == Op::set || r.op == Op::set_owned)
        r.value = in.bytes();
    else if (r.op == Op::add)
        r.delta = in.i64();
    else if (has_keys(r.op)) {
        const std::uint32_t n = in.u32();
        for (std::uint32_t i = 0; i < n; ++i)
            r.keys.push_back(in.str()); // a short payload ends the loop with an error
    }
    in.finish();
    return r;
}

struct Answer {
    std::uint32_t id = 0;
    Status status = Status::ok;
    std::vector<std::byte> value; // get; contains_each: a byte per key, 1 where it exists;
                                  // get_each: as the header says
    std::int64_t sum = 0;         // add
};

/// Whether an answer to `op` carries a value.
inline bool has_value(Op op, Status status)
{
    return (op == Op::get && status == Status::ok) || has_keys(op);
}

inline std::vector<std::byte> encode(const Answer& a, Op op)
{
    wire::Writer w;
    w.u32(a.id);
    w.u8(static_cast<std::uint8_t>(a.status));
    if (has_value(op, a.status))
        w.bytes(a.value);
    else if (op == Op::add)
        w.i64(a.sum);
    return w.data();
}

/// The id of an answer, read before the rest (a late answer to an earlier
/// request has another op's layout).
inline std::uint32_t answer_id(std::span<const std::byte> payload)
{
    wire::Reader in(payload, "store answer", "TCP store");
    return in.u32();
}

inline Answer decode_answer(std::span<const std::byte> payload, Op op)
{
    wire::Reader in(payload, "store answer", "TCP store");
    Answer a;
    a.id = in.u32();
    const auto status = in.u8();
    if (status > static_cast<std::uint8_t>(Status::not_a_number))
        throw Error("store", -EPROTO, "",
                    "the store server sent an unknown status " + std::to_string(status) +
                        ": it is not a weft program of this version");
    a.status = static_cast<Status>(status);
    if (has_value(op, a.status))
        a.value = in.bytes();
    else if (op == Op::add)
        a.sum = in.i64();
    in.finish();
    return a;
}

} // namespace weft::detail::store
