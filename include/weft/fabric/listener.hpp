// SPDX-License-Identifier: MIT
/// @brief A passive endpoint (fi_passive_ep) that listens for MSG connections:
/// a Server or a Node listens with one and accepts each FI_CONNREQ with
/// Endpoint::accept() or begin_accept().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <rdma/fi_cm.h>

#include "weft/base/deadline.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/fabric/event_queue.hpp"
#include "weft/fabric/fabric.hpp"
#include "weft/base/detail/fid.hpp"
#include "weft/info/info.hpp"

namespace weft {

/// Owns a fid_pep bound to its own EventQueue; keeps the Fabric alive.
/// One thread at a time.
class Listener {
public:
    /// Listens on the source address in `info` (port 0 = any free port).
    static std::shared_ptr<Listener> open(std::shared_ptr<Fabric> fabric, const Info& info);
    /// The same, reporting on `eq` (shared with the endpoints it accepts: a Node).
    static std::shared_ptr<Listener> open(std::shared_ptr<Fabric> fabric, const Info& info,
                                          std::shared_ptr<EventQueue> eq);

    /// The address peers connect to (fi_getname after fi_listen).
    std::vector<std::byte> name() const;

    /// Waits for a connection request whose connection data equals `token`
    /// (others are rejected), accepts it on `domain`, and returns the connected
    /// endpoint. An empty token accepts the first request.
    std::shared_ptr<Endpoint> accept(const std::shared_ptr<Domain>& domain, const Options& options,
                                     std::span<const std::byte> token, Deadline deadline);

    /// The first half of accept(): waits for a matching FI_CONNREQ (rejecting
    /// others) and returns it, for Endpoint::accept.
    EventQueue::Event wait_request(std::span<const std::byte> token, Deadline deadline);

    /// The next connection request if one is waiting (never blocks), for a
    /// caller that matches requests to clients itself; other events are dropped.
    std::optional<EventQueue::Event> poll_request();
    /// Refuses a request from poll_request() or wait_request().
    void reject(const EventQueue::Event& request) noexcept;

    fid_pep* get() const noexcept { return fid_.get(); }

    struct Private;
    Listener(Private, std::shared_ptr<Fabric> fabric, std::shared_ptr<EventQueue> eq, Info info);

private:
    std::shared_ptr<Fabric> fabric_;
    std::shared_ptr<EventQueue> eq_;
    Info info_; // providers may keep pointers into it (sockets does): lives as long as the pep
    detail::FidPtr<fid_pep> fid_;
};

} // namespace weft
