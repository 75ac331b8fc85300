// SPDX-License-Identifier: MIT
#include "side_wire.hpp"

#include <cstring>
#include <string>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "socket.hpp"
#include "wire.hpp"
#include "weft/base/version.hpp"

namespace weft::detail::side {
namespace {

constexpr std::array<char, 4> magic = {'W', 'E', 'F', 'T'};
constexpr std::uint32_t hello_requires_secret = 1u << 0;

} // namespace

Header encode_header(detail::Frame type, std::size_t payload_size)
{
    Header h{};
    wire::Placer(h)
        .raw(std::as_bytes(std::span(magic)))
        .u16(bootstrap_version)
        .u16(static_cast<std::uint16_t>(type))
        .u32(static_cast<std::uint32_t>(payload_size));
    return h;
}

FrameHead decode_header(std::span<const std::byte, header_size> h, std::string_view peer)
{
    if (std::memcmp(h.data(), magic.data(), magic.size()) != 0) {
        std::string printable;
        for (std::size_t i = 0; i < 4; ++i) {
            const auto c = std::to_integer<unsigned char>(h[i]);
            printable += c >= 32 && c < 127 ? static_cast<char>(c) : '.';
        }
        side_fail(-EPROTO, fmt::format("{} is not a weft peer: its first bytes were {:02x} {:02x} "
                                       "{:02x} {:02x} ('{}'), not 'WEFT'. Check the host:port",
                                       peer, std::to_integer<unsigned>(h[0]),
                                       std::to_integer<unsigned>(h[1]),
                                       std::to_integer<unsigned>(h[2]),
                                       std::to_integer<unsigned>(h[3]), printable));
    }
    wire::Reader fields(h.subspan(magic.size()), "frame header"); // its size is fixed
    const std::uint16_t version = fields.u16();
    const std::uint16_t type = fields.u16();
    const FrameHead head{type, fields.u32()};
    if (version != bootstrap_version)
        side_fail(-EPROTO, fmt::format("version mismatch: {} speaks weft bootstrap v{}, this "
                                       "program speaks v{}: run the same weft version on both sides",
                                       peer, version, bootstrap_version));
    if (head.size > max_payload)
        side_fail(-EPROTO, fmt::format("{} announced a {} B frame (limit {} B): garbage on the side "
                                       "channel",
                                       peer, head.size, max_payload));
    return head;
}

void check_frame(const FrameHead& head, Frame expected, std::span<const std::byte> payload,
                 std::string_view peer)
{
    if (head.type == static_cast<unsigned>(detail::Frame::error))
        side_fail(-FI_ECONNABORTED,
                  fmt::format("the peer {} failed: {}", peer,
                              std::string_view(reinterpret_cast<const char*>(payload.data()),
                                               payload.size())));
    if (head.type != static_cast<unsigned>(expected))
        side_fail(-EPROTO, fmt::format("protocol error: expected the {} frame from {}, got frame "
                                       "type {} ({})",
                                       to_string(expected), peer, head.type,
                                       to_string(static_cast<detail::Frame>(head.type))));
}

std::vector<std::byte> hello_payload(bool requires_secret)
{
    wire::Writer out;
    out.u32(requires_secret ? hello_requires_secret : 0);
    out.raw(weft::version);
    return out.data();
}

void check_hello(std::span<const std::byte> payload, bool have_secret, std::string_view peer)
{
    if (payload.size() < 4)
        side_fail(-EPROTO, fmt::format("{} sent a {} B hello (at least 4 B expected): garbage on the "
                                       "side channel",
                                       peer, payload.size()));
    const bool peer_requires = (wire::get_le(payload.data(), 4) & hello_requires_secret) != 0;
    if (peer_requires && !have_secret)
        side_fail(-FI_EACCES, fmt::format("{} requires a shared secret and this side has none: set "
                                          "Options::secret (or WEFT_SECRET) to the peer's secret",
                                          peer));
    if (!peer_requires && have_secret)
        side_fail(-FI_EACCES, fmt::format("{} does not use a shared secret, but this side requires "
                                          "one: nothing was sent to it. Give the peer the same "
                                          "secret (Options::secret or WEFT_SECRET)",
                                          peer));
}

} // namespace weft::detail::side
