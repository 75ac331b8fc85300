// Lesson 3, client: one of many. Write this client's id, spread over every
// byte of a block, into the server's inbox for it, with a notification
// carrying the id. Run: client HOST:PORT ID
#include <weft/weft.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>

using namespace std::chrono_literals;

int main(int argc, char** argv)
try {
    if (argc < 3) {
        std::cerr << "usage: " << argv[0] << " HOST:PORT ID\n";
        return 2;
    }
    const auto id = static_cast<std::uint32_t>(std::atoi(argv[2]));
    weft::Connection c = weft::Connection::connect(argv[1], weft::Options{},
                                                   weft::Deadline::after(30s));
    auto mine = c.allocate(1, weft::Access::remote_read); // the exchange is symmetric
    // The server exchanges with its clients one by one: wait for this one's turn.
    const weft::RemoteRegion inbox = c.exchange(mine->remote(), weft::Deadline::after(30s));

    auto src = c.allocate(inbox.length(), weft::Access::local);
    for (std::size_t i = 0; i < src->size(); ++i)
        src->data()[i] = static_cast<std::byte>(id * 37 + i);
    int ctx = 0;
    c.write_notify(src->all(), inbox, /*offset=*/0, /*value=*/id, &ctx);
    c.wait(&ctx, weft::Deadline::after(5s));
    c.barrier(weft::Deadline::after(30s)); // the server has checked it; nothing in flight
    std::cout << "client " << id << ": written" << std::endl;
} catch (const weft::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
}
