// SPDX-License-Identifier: MIT
// fi_getinfo with weft's hints, and the explanation of an empty answer: each
// attribute switched on in turn until the one that excludes the provider.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <rdma/fabric.h>

#include "traits.hpp"
#include "weft/base/detail/fid.hpp"
#include "weft/select/select.hpp"

namespace weft::detail {


/// The attributes of one fi_getinfo attempt; explain() switches them on one by one.
struct Attempt {
    std::string path;
    bool with_kind = true;
    EndpointKind kind = EndpointKind::msg;
    std::uint64_t caps = FI_MSG | FI_RMA;
    bool with_mr_mode = true;
    bool with_mode = true;
    bool with_domain = true;
    bool with_node = true;
    bool with_depth = true;
    // client side: the peer's address
    std::uint32_t addr_format = FI_FORMAT_UNSPEC;
    const void* dest = nullptr;
    std::size_t dest_len = 0;
};

/// fi_getinfo for one attempt; a pinned domain is honoured (not every provider does).
int getinfo(const Options& o, const Attempt& a, InfoPtr& out);
/// The same, with FI_ATOMIC when the provider offers it.
int getinfo_best(const Options& o, Attempt a, InfoPtr& out);
/// Why `target` yields nothing.
std::string explain(const Options& o, const Attempt& target);
/// " (FI_PROVIDER=... is set: ...)" or "".
std::string fi_provider_note();
std::string env(const char* name);

/// One provider's verdict for these options, as select() and survey() see it.
struct Evaluation {
    std::string path;
    EndpointKind kind = EndpointKind::msg;
    InfoPtr list;      ///< non-null when usable
    std::string why;   ///< why not usable
    std::string found; ///< what the provider's probe found
};
Evaluation evaluate(const Options& o, const providers::Traits& t, EndpointKind kind);

/// The providers on this machine whose endpoints offer remote atomics weft can
/// use ("shm (RDM), sockets (MSG, RDM)"), or "" when none does.
std::string providers_with_atomics();

} // namespace weft::detail
