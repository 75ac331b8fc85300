// SPDX-License-Identifier: MIT
// weft's one little-endian codec: every byte layout weft puts on a wire (the
// side channel's frames and payloads, RemoteRegion, NodeAddress, the framed
// messages' header, the hello and its credit block, the TCP store's requests)
// is written with Writer (a growing buffer) or Placer (in place, into a
// buffer sized already: a registered slot, a fixed array) and read with
// Reader (bounds-checked) or get_le (a layout whose size was checked).
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rdma/fi_errno.h>

#include "weft/base/error.hpp"

namespace weft::wire {

/// The low `n` bytes of `v` at `p`, little-endian: every fixed-layout field
/// weft puts on a wire (headers, hellos, credit blocks, descriptors).
inline void put_le(std::byte* p, std::uint64_t v, std::size_t n) noexcept
{
    for (std::size_t i = 0; i < n; ++i)
        p[i] = static_cast<std::byte>(v >> (8 * i));
}
/// `n` little-endian bytes at `p`.
inline std::uint64_t get_le(const std::byte* p, std::size_t n) noexcept
{
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
        v |= std::uint64_t(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
    return v;
}

inline std::span<const std::byte> as_bytes(std::string_view s) noexcept
{
    return std::as_bytes(std::span(s.data(), s.size()));
}

/// Fields appended to a growing buffer.
class Writer {
public:
    void u8(std::uint8_t v) { out_.push_back(std::byte{v}); }
    void u16(std::uint16_t v) { put(v, 2); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
    /// Bytes as they are, no length in front (a magic, a trailing field).
    void raw(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
    void raw(std::string_view s) { raw(as_bytes(s)); }
    /// A u32 length, then the bytes.
    void bytes(std::span<const std::byte> b)
    {
        u32(static_cast<std::uint32_t>(b.size()));
        raw(b);
    }
    void str(std::string_view s) { bytes(std::as_bytes(std::span(s.data(), s.size()))); }
    const std::vector<std::byte>& data() const noexcept { return out_; }

private:
    void put(std::uint64_t v, std::size_t n)
    {
        // Through a local array: GCC 12 mistakes a resize-then-write of the
        // vector for an out-of-bounds memset (-Warray-bounds, at -O2 + TSan).
        std::array<std::byte, 8> le{};
        put_le(le.data(), v, n);
        out_.insert(out_.end(), le.begin(), le.begin() + static_cast<std::ptrdiff_t>(n));
    }
    std::vector<std::byte> out_;
};

/// Fields written in place, into a buffer its caller sized for them: no
/// allocation, no throw (writing past its end is a bug: asserted).
class Placer {
public:
    explicit Placer(std::span<std::byte> out) noexcept : out_(out) {}
    Placer& u8(std::uint8_t v) noexcept { return put(v, 1); }
    Placer& u16(std::uint16_t v) noexcept { return put(v, 2); }
    Placer& u32(std::uint32_t v) noexcept { return put(v, 4); }
    Placer& u64(std::uint64_t v) noexcept { return put(v, 8); }
    Placer& raw(std::span<const std::byte> b) noexcept
    {
        assert(pos_ + b.size() <= out_.size());
        std::copy(b.begin(), b.end(), out_.begin() + static_cast<std::ptrdiff_t>(pos_));
        pos_ += b.size();
        return *this;
    }
    /// Bytes written so far.
    std::size_t size() const noexcept { return pos_; }

private:
    Placer& put(std::uint64_t v, std::size_t n) noexcept
    {
        assert(pos_ + n <= out_.size());
        put_le(out_.data() + pos_, v, n);
        pos_ += n;
        return *this;
    }
    std::span<std::byte> out_;
    std::size_t pos_ = 0;
};

/// Fields read from bytes a peer sent: each read checks that they are there.
/// A short or over-long message is an Error of `call` naming `what`.
class Reader {
public:
    Reader(std::span<const std::byte> in, std::string_view what,
           std::string_view call = "bootstrap")
        : in_(in), what_(what), call_(call)
    {
    }
    std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
    std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() { return get(8); }
    std::int64_t i64() { return static_cast<std::int64_t>(get(8)); }
    /// The next `n` bytes as they are.
    std::span<const std::byte> raw(std::size_t n)
    {
        need(n);
        const auto out = in_.subspan(pos_, n);
        pos_ += n;
        return out;
    }
    /// Every byte not read yet.
    std::span<const std::byte> rest() { return raw(in_.size() - pos_); }
    std::vector<std::byte> bytes()
    {
        const auto b = raw(u32());
        return {b.begin(), b.end()};
    }
    std::string str()
    {
        auto b = bytes();
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }

    /// Throws unless every byte was read: trailing bytes are garbage too.
    void finish() const
    {
        if (pos_ != in_.size())
            throw Error(std::string(call_), -EPROTO, "",
                        std::string("the peer's ") + std::string(what_) + " message has " +
                            std::to_string(in_.size() - pos_) +
                            " trailing bytes: the peer is not a weft program of this version, "
                            "or the data is corrupt");
    }

private:
    void need(std::size_t n)
    {
        if (in_.size() - pos_ < n)
            throw Error(std::string(call_), -EPROTO, "",
                        std::string("the peer's ") + std::string(what_) +
                            " message is truncated: the peer is not a weft program of this "
                            "version, or the data is corrupt");
    }
    std::uint64_t get(int n)
    {
        need(static_cast<std::size_t>(n));
        const std::uint64_t v = get_le(in_.data() + pos_, static_cast<std::size_t>(n));
        pos_ += static_cast<std::size_t>(n);
        return v;
    }
    std::span<const std::byte> in_;
    std::string_view what_;
    std::string_view call_;
    std::size_t pos_ = 0;
};

} // namespace weft::wire
