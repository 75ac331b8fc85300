// SPDX-License-Identifier: MIT
// The side channel's shared-secret check (see bootstrap.hpp): a mutual
// HMAC-SHA256 challenge-response with OpenSSL, and the secret's own checks.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "random.hpp"
#include "side_wire.hpp"
#include "weft/bootstrap/bootstrap.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace detail::side {
namespace {

/// HMAC-SHA256(secret, label || a || b).
Mac proof_of(std::string_view secret, std::string_view label, const Nonce& a, const Nonce& b)
{
    std::array<unsigned char, 64 + 2 * nonce_size> msg{};
    std::memcpy(msg.data(), label.data(), label.size());
    std::memcpy(msg.data() + label.size(), a.data(), a.size());
    std::memcpy(msg.data() + label.size() + a.size(), b.data(), b.size());
    Mac mac{};
    unsigned len = 0;
    if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(),
              label.size() + a.size() + b.size(), reinterpret_cast<unsigned char*>(mac.data()),
              &len) ||
        len != mac.size())
        throw Error("HMAC", -FI_EOTHER, "", "OpenSSL could not compute HMAC-SHA256");
    return mac;
}

bool same_mac(const Mac& expected, std::span<const std::byte> got)
{
    return got.size() == expected.size() &&
           CRYPTO_memcmp(expected.data(), got.data(), expected.size()) == 0;
}

constexpr std::string_view client_label = "weft-v2 client";
constexpr std::string_view server_label = "weft-v2 server";

} // namespace

Nonce random_nonce()
{
    Nonce n;
    detail::random_bytes(n, "a shared-secret challenge");
    return n;
}

Mac acceptor_proof(std::string_view secret, const Nonce& challenge,
                   std::span<const std::byte> answer, std::string_view peer)
{
    Nonce nc{};
    bool ok = answer.size() == nonce_size + mac_size;
    if (ok) {
        std::memcpy(nc.data(), answer.data(), nonce_size);
        ok = same_mac(proof_of(secret, client_label, challenge, nc), answer.subspan(nonce_size));
    }
    if (!ok)
        throw Error("bootstrap", -FI_EACCES, "",
                    fmt::format("{} failed the shared-secret check: it holds a different secret "
                                "(or is not a weft peer). Nothing was sent to it",
                                peer));
    return proof_of(secret, server_label, nc, challenge);
}

/// The connector's answer to `challenge`: its nonce and proof, and the
/// acceptor's proof it expects back.
std::pair<std::array<std::byte, nonce_size + mac_size>, Mac>
connector_answer(std::string_view secret, const Nonce& challenge)
{
    const Nonce nc = random_nonce();
    std::array<std::byte, nonce_size + mac_size> answer{};
    const Mac mine = proof_of(secret, client_label, challenge, nc);
    std::memcpy(answer.data(), nc.data(), nonce_size);
    std::memcpy(answer.data() + nonce_size, mine.data(), mac_size);
    return {answer, proof_of(secret, server_label, nc, challenge)};
}

} // namespace detail::side

using namespace detail::side;

void SideChannel::authenticate(Deadline deadline, detail::Role role, std::string_view secret)
{
    if (role == detail::Role::acceptor) {
        const Nonce ns = random_nonce();
        send(detail::Frame::challenge, ns, deadline);
        const auto answer = receive(detail::Frame::proof, deadline);
        Mac proof{};
        try {
            proof = acceptor_proof(secret, ns, answer, peer_);
        } catch (const Error&) {
            send_error(secret_mismatch);
            throw;
        }
        send(detail::Frame::proof, proof, deadline);
    } else {
        const auto challenge = receive(detail::Frame::challenge, deadline);
        if (challenge.size() != nonce_size)
            throw Error("bootstrap", -EPROTO, "",
                        fmt::format("{} sent a {} B challenge ({} B expected): garbage on the "
                                    "side channel",
                                    peer_, challenge.size(), nonce_size));
        Nonce ns{};
        std::memcpy(ns.data(), challenge.data(), nonce_size);
        const auto [answer, expected] = connector_answer(secret, ns);
        send(detail::Frame::proof, answer, deadline);
        const auto theirs = receive(detail::Frame::proof, deadline);
        if (!same_mac(expected, theirs))
            throw Error("bootstrap", -FI_EACCES, "",
                        fmt::format("{} answered the shared-secret challenge wrongly: it does not "
                                    "hold this side's secret. Nothing was sent to it; check that "
                                    "you reached the right server",
                                    peer_));
    }
    authenticated_ = true;
}

void check_secret(std::string_view secret)
{
    if (secret.size() < min_secret_size)
        throw UsageError("shared secret", -FI_EINVAL, "",
                         fmt::format("a {} B shared secret is too short to resist guessing: use at "
                                     "least {} random bytes, e.g. `head -c 32 /dev/urandom | "
                                     "base64`",
                                     secret.size(), min_secret_size));
}

std::string resolve_secret(std::string_view configured)
{
    std::string secret(configured);
    if (secret.empty())
        if (const char* env = std::getenv("WEFT_SECRET"))
            secret = env;
    if (!secret.empty())
        check_secret(secret);
    return secret;
}

} // namespace weft
