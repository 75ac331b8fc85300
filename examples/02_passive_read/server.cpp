// Lesson 2, server: a passive target. Fill a buffer, hand out its RemoteRegion,
// and take no part in the transfer: the client reads it with one RMA read.
// Run: server [PORT]
#include <weft/weft.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>

using namespace std::chrono_literals;

int main(int argc, char** argv)
try {
    const auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 7472);
    // Progress::automatic (the default): where the provider moves data only while
    // its queue is read, a weft progress thread reads it for this idle side.
    weft::Server server(weft::Options{}, "0.0.0.0", port);
    std::cout << server.selection().report() << "listening on port " << server.port() << std::endl;
    std::shared_ptr<weft::MemoryRegion> data; // memory a peer reaches outlives its connection
    weft::Connection c = server.accept(weft::Deadline::after(30s));

    data = c.allocate(1 << 20, weft::Access::remote_read); // readable, never writable
    for (std::size_t i = 0; i < data->size(); ++i)
        data->data()[i] = static_cast<std::byte>(i * 7 + i / 4096);
    (void)c.exchange(data->remote(), weft::Deadline::after(5s));
    const weft::Endpoint& ep = c.endpoint(); // for its progress counters, below

    // Nothing on the data path now: no poll, no wait. Only the side channel says
    // when the client is done (it hangs up).
    if (!c.side().peer_closed(30s)) {
        std::cerr << "the client did not finish within 30 s\n";
        return 1;
    }
    std::cout << "served " << data->size() << " bytes without polling" << std::endl;
    if (ep.progress_thread()) // the report above says why
        std::cout << "a weft progress thread drove the idle queue " << ep.progress_drives()
                  << " times" << std::endl;
} catch (const weft::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
}
