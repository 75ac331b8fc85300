// Lesson 3, server: many clients on one server. accept() runs every client's
// bootstrap at once; each client writes into an inbox of its own with a
// notification, and each Connection's wait_for() hands out its own client's.
// Run: server [PORT] [CLIENTS], then CLIENTS clients with ids 0..CLIENTS-1.
#include <weft/weft.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv)
try {
    const auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 7473);
    const auto n = static_cast<std::size_t>(argc > 2 ? std::atoi(argv[2]) : 4);
    weft::Server server(weft::Options{}, "0.0.0.0", port);
    std::cout << server.selection().report() << "listening on port " << server.port() << std::endl;

    std::vector<std::shared_ptr<weft::MemoryRegion>> inboxes; // outlive the connections
    std::vector<weft::Connection> clients;
    for (std::size_t k = 0; k < n; ++k) { // in the order their bootstraps finish
        clients.push_back(server.accept(weft::Deadline::after(30s)));
        inboxes.push_back(clients[k].allocate(4096, weft::Access::remote_write));
        (void)clients[k].exchange(inboxes[k]->remote(), weft::Deadline::after(5s));
    }
    std::set<std::uint32_t> ids; // each id once
    std::size_t verified = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const weft::Completion note =
            clients[k].wait_for(weft::Op::notify, weft::Deadline::after(10s));
        bool ok = note.data < n && ids.insert(note.data).second;
        for (std::size_t i = 0; i < inboxes[k]->size(); ++i)
            ok = ok && inboxes[k]->data()[i] == static_cast<std::byte>(note.data * 37 + i);
        verified += ok;
        std::cout << "client " << note.data << (ok ? ": verified" : ": WRONG") << std::endl;
        clients[k].barrier(weft::Deadline::after(10s));
    }
    std::cout << (verified == n ? "all " : "NOT all ") << n << " clients verified" << std::endl;
    return verified == n ? 0 : 1;
} catch (const weft::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
}
