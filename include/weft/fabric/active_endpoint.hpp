// SPDX-License-Identifier: MIT
/// @brief The thin RAII endpoint (fid_ep): open, bind, enable, connect,
/// accept, name, close. It keeps what it is bound to alive and knows nothing
/// of weft's receive slots, framing, credits or hello: that is Endpoint's
/// per-peer state, built on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <rdma/fi_endpoint.h>

#include "weft/fabric/address_vector.hpp"
#include "weft/fabric/completion_queue.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/fabric/event_queue.hpp"
#include "weft/base/detail/fid.hpp"

namespace weft {

class ActiveEndpoint {
public:
    /// Not open yet: open() makes the fid.
    explicit ActiveEndpoint(std::shared_ptr<Domain> domain) noexcept : domain_(std::move(domain))
    {
    }
    ActiveEndpoint(const ActiveEndpoint&) = delete;
    ActiveEndpoint& operator=(const ActiveEndpoint&) = delete;
    ~ActiveEndpoint() = default;

    /// fi_endpoint for `info`, which it keeps (providers may keep pointers into
    /// it). Completions are selective (FI_SELECTIVE_COMPLETION, see selective())
    /// where the provider takes FI_COMPLETION as a default op flag.
    void open(Info info);
    /// fi_ep_bind to the completion queue for transmit and receive (selective
    /// where open() made it so), to an event queue (MSG), or to an address
    /// vector (RDM). Each is kept alive as long as this endpoint.
    void bind(std::shared_ptr<CompletionQueue> cq);
    void bind(std::shared_ptr<EventQueue> eq);
    void bind(std::shared_ptr<AddressVector> av);
    /// The provider's set-up before fi_enable, then fi_enable.
    void enable();
    /// MSG: fi_connect to the info's dest_addr with `param` as connection data.
    void connect(std::span<const std::byte> param);
    /// MSG: fi_accept of the FI_CONNREQ whose info open() took.
    void accept();
    /// fi_getname: the address to hand to a peer.
    std::vector<std::byte> name() const;

    /// Closes the fid (fi_close); what it was bound to stays alive until
    /// this object goes. Idempotent.
    void close() noexcept;
    /// Gives the fid and what it is bound to up for good, closed never: for a
    /// provider that may still touch them (a thread stuck inside it) or cannot
    /// close them (unclosable()). `also` joins them.
    void abandon(std::span<const std::shared_ptr<void>> also) noexcept;
    /// Endpoints abandon()ed in this process.
    static std::size_t abandoned() noexcept;
    /// fi_enable failed on a layered provider: libfabric 1.17's ofi_rxm leaves
    /// the endpoint half torn down, and fi_close on it crashes (on siw).
    bool unclosable() const noexcept { return unclosable_; }

    fid_ep* get() const noexcept { return fid_.get(); }
    bool closed() const noexcept { return !fid_; }
    /// The info it was opened with (null before open() and after abandon()).
    const fi_info* info() const noexcept { return info_ ? info_->get() : nullptr; }
    /// FI_SELECTIVE_COMPLETION: a post without FI_COMPLETION completes silently.
    bool selective() const noexcept { return selective_; }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }
    std::string_view provider() const noexcept { return domain_->provider(); }

private:
    std::shared_ptr<Domain> domain_;
    std::shared_ptr<CompletionQueue> cq_;
    std::shared_ptr<EventQueue> eq_;
    std::shared_ptr<AddressVector> av_;
    std::optional<Info> info_; // lives as long as fid_
    bool selective_ = false;
    bool unclosable_ = false;
    detail::FidPtr<fid_ep> fid_;
};

} // namespace weft
