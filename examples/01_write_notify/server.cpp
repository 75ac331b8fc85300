// Lesson 1, server: accept one client, expose memory for remote writes, and
// wait for the client's write with a notification. Run: server [PORT]
#include <weft/weft.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>

using namespace std::chrono_literals;

int main(int argc, char** argv)
{
    // Chooses the provider (and says why), then listens; port 0 picks a free one.
    const auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 7471);
    weft::Server server(weft::Options{}, "0.0.0.0", port);
    std::cout << server.selection().report() << "listening on port " << server.port() << std::endl;
    weft::Connection c = server.accept(weft::Deadline::after(30s));

    auto inbox = c.allocate(4096, weft::Access::remote_write); // exported for remote writes only
    (void)c.exchange(inbox->remote(), weft::Deadline::after(5s)); // the client's is not needed

    weft::Completion n = c.wait_for(weft::Op::notify, weft::Deadline::after(5s));
    // The data is in place when the notification arrives.
    std::cout << "notified with " << n.data << ": \""
              << reinterpret_cast<const char*>(inbox->data()) << "\"" << std::endl;
    c.barrier(weft::Deadline::after(5s)); // both done: nothing is in flight when inbox goes
}
