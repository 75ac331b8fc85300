// Lesson 2, client: read the server's buffer with one RMA read and check every
// byte; the server's CPU takes no part. Run: client [HOST:PORT]
#include <weft/weft.hpp>

#include <cstddef>
#include <iostream>

using namespace std::chrono_literals;

int main(int argc, char** argv)
try {
    weft::Connection c = weft::Connection::connect(argc > 1 ? argv[1] : "localhost:7472",
                                                   weft::Options{}, weft::Deadline::after(30s));
    auto mine = c.allocate(1, weft::Access::remote_read); // the exchange is symmetric
    const weft::RemoteRegion source = c.exchange(mine->remote(), weft::Deadline::after(5s));

    auto sink = c.allocate(source.length(), weft::Access::local); // a read's sink: local
    int ctx = 0;
    c.read(sink->all(), source, /*offset=*/0, &ctx);
    c.wait(&ctx, weft::Deadline::after(5s)); // the bytes are in sink now

    std::size_t wrong = 0;
    for (std::size_t i = 0; i < sink->size(); ++i)
        wrong += sink->data()[i] != static_cast<std::byte>(i * 7 + i / 4096);
    std::cout << "read " << sink->size() << " bytes over " << c.selection().provider() << ": "
              << (wrong == 0 ? "every byte as written" : "WRONG bytes") << std::endl;
    return wrong == 0 ? 0 : 1;
} catch (const weft::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
}
