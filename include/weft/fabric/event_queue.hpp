// SPDX-License-Identifier: MIT
/// @brief The event queue (fi_eq) for connection management of MSG endpoints:
/// connection requests, FI_CONNECTED and FI_SHUTDOWN, read by a Listener,
/// an Endpoint being connected, or a Node for all its MSG peers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rdma/fi_eq.h>

#include "weft/base/deadline.hpp"
#include "weft/fabric/fabric.hpp"
#include "weft/base/detail/fid.hpp"
#include "weft/info/info.hpp"

namespace weft {

/// Owns a fid_eq; keeps its Fabric alive. One thread at a time.
class EventQueue {
public:
    /// `sleepable`: with a file descriptor (FI_WAIT_FD) for a caller that sleeps on it.
    static std::shared_ptr<EventQueue> open(std::shared_ptr<Fabric> fabric, bool sleepable = false);
    /// The descriptor (-1 unless opened sleepable).
    int fd() const noexcept { return fd_; }

    struct Event {
        std::uint32_t type = 0;     ///< FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, ...
        fid_t fid = nullptr;        ///< the endpoint the event is about
        std::optional<Info> info;   ///< FI_CONNREQ: the request, used to accept / reject
        std::vector<std::byte> data; ///< connection data sent with fi_connect / fi_accept
        int error = 0;               ///< read_any(): a failed event's negative errno (type 0)
        std::string error_text;      ///< read_any(): the provider's words for it
    };

    /// Waits for the next event until `deadline`. Throws weft::Error for an error
    /// event (with fi_eq_strerror text, e.g. "connection refused") and
    /// TimeoutError naming `waiting_for` when the deadline passes.
    Event wait(Deadline deadline, std::string_view waiting_for);
    /// The next event if one is ready (never blocks); errors as wait().
    std::optional<Event> read(std::string_view waiting_for);
    /// The next event if one is ready, a failed one as an Event with `error`
    /// set and the fid it is about (for a caller that routes events by fid).
    std::optional<Event> read_any();

    fid_eq* get() const noexcept { return fid_.get(); }
    const std::shared_ptr<Fabric>& fabric() const noexcept { return fabric_; }

    struct Private;
    EventQueue(Private, std::shared_ptr<Fabric> fabric, detail::FidPtr<fid_eq> fid);

private:
    std::optional<Event> next(int timeout_ms, std::string_view waiting_for, bool errors_as_events = false);

    std::shared_ptr<Fabric> fabric_;
    detail::FidPtr<fid_eq> fid_;
    int fd_ = -1;
};

std::string_view event_name(std::uint32_t type) noexcept;

} // namespace weft
