// Lesson 1, client: connect, write a message into the server's memory with
// a notification, and wait for the write to complete. Run: client [HOST:PORT]
#include <weft/weft.hpp>

#include <cstring>
#include <iostream>

using namespace std::chrono_literals;

int main(int argc, char** argv)
{
    // The server chooses the provider; this side follows (on every provider,
    // MSG or RDM endpoints alike).
    weft::Connection c = weft::Connection::connect(argc > 1 ? argv[1] : "localhost:7471",
                                                   weft::Options{}, weft::Deadline::after(30s));
    std::cout << "connected over " << c.selection().provider() << std::endl;

    auto src = c.allocate(4096, weft::Access::local);          // a source needs no remote access
    auto mine = c.allocate(4096, weft::Access::remote_write);  // the exchange is symmetric
    weft::RemoteRegion target = c.exchange(mine->remote(), weft::Deadline::after(5s));

    std::strcpy(reinterpret_cast<char*>(src->data()), "hello from the client");
    int ctx = 0;
    c.write_notify(src->slice(0, 64), target, /*offset=*/0, /*value=*/42, &ctx);
    c.wait(&ctx, weft::Deadline::after(5s)); // src may be reused now
    c.barrier(weft::Deadline::after(5s));
    std::cout << "written" << std::endl;
}
