// SPDX-License-Identifier: MIT
// The side channel's frames (bootstrap.hpp has the format), its hello and the
// acceptor's half of the shared-secret check, as plain functions: the blocking
// SideChannel and the server's non-blocking handshakes (server.cpp) share them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/bootstrap/bootstrap.hpp"

namespace weft {

inline constexpr std::uint16_t bootstrap_version = 3;

/// The smallest shared secret weft accepts, in bytes.
inline constexpr std::size_t min_secret_size = 16;

/// Checks a shared secret's strength; throws UsageError naming the fix.
void check_secret(std::string_view secret);

/// Options::secret, else the WEFT_SECRET environment variable, checked.
std::string resolve_secret(std::string_view configured);

} // namespace weft

namespace weft::detail::side {

inline constexpr std::size_t header_size = 12;
inline constexpr std::uint32_t max_payload = 1u << 20;
inline constexpr std::size_t nonce_size = 32;
inline constexpr std::size_t mac_size = 32; // HMAC-SHA256

using Header = std::array<std::byte, header_size>;
using Nonce = std::array<std::byte, nonce_size>;
using Mac = std::array<std::byte, mac_size>;

Header encode_header(detail::Frame type, std::size_t payload_size);

struct FrameHead {
    unsigned type;
    std::uint32_t size;
};
/// Validates magic, version and size; throws weft::Error naming `peer`.
FrameHead decode_header(std::span<const std::byte, header_size> h, std::string_view peer);

/// After its payload arrived: an `error` frame raises the peer's text, any
/// other type than `expected` is a protocol error.
void check_frame(const FrameHead& head, Frame expected, std::span<const std::byte> payload,
                 std::string_view peer);

/// Hello: flags (u32 LE), then the library version as text.
std::vector<std::byte> hello_payload(bool requires_secret);
/// Throws when the peer's hello is malformed or its secret setting differs.
void check_hello(std::span<const std::byte> payload, bool have_secret, std::string_view peer);

Nonce random_nonce();
/// The acceptor checks the connector's proof (its nonce and HMAC) against
/// its challenge; returns the acceptor's own proof, or throws weft::Error
/// (-FI_EACCES) saying that the secrets differ.
Mac acceptor_proof(std::string_view secret, const Nonce& challenge,
                   std::span<const std::byte> answer, std::string_view peer);
/// Error text sent to a connector whose proof failed.
inline constexpr std::string_view secret_mismatch = "shared-secret check failed: the secrets differ";

} // namespace weft::detail::side
