// SPDX-License-Identifier: MIT
// Little-endian field encoding for bootstrap payloads, with bounds-checked reads.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rdma/fi_errno.h>

#include "weft/error.hpp"

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

class Writer {
public:
    void u8(std::uint8_t v) { out_.push_back(std::byte{v}); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void bytes(std::span<const std::byte> b)
    {
        u32(static_cast<std::uint32_t>(b.size()));
        out_.insert(out_.end(), b.begin(), b.end());
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

class Reader {
public:
    Reader(std::span<const std::byte> in, std::string_view what) : in_(in), what_(what) {}
    std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() { return get(8); }
    std::vector<std::byte> bytes()
    {
        const std::uint32_t n = u32();
        need(n);
        std::vector<std::byte> out(in_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                   in_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
        pos_ += n;
        return out;
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
            throw Error("bootstrap", -EPROTO, "",
                        std::string("the peer's ") + std::string(what_) + " message has " +
                            std::to_string(in_.size() - pos_) +
                            " trailing bytes: the peer is not a weft program of this version, "
                            "or the data is corrupt");
    }

private:
    void need(std::size_t n)
    {
        if (in_.size() - pos_ < n)
            throw Error("bootstrap", -EPROTO, "",
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
    std::size_t pos_ = 0;
};

} // namespace weft::wire
