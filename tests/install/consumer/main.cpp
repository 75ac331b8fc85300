// A consumer of the installed weft: one RMA write over loopback through the
// public headers only, then prints "consumer ok".
#include <cstdio>
#include <cstring>
#include <future>

#include <weft/weft.hpp>

int main()
{
    using namespace std::chrono_literals;
    weft::Options o;
    o.node = "127.0.0.1";
    weft::Server server(o, "127.0.0.1", 0);
    auto accepted = std::async(std::launch::async, [&] { return server.accept(weft::Deadline::after(20s)); });
    auto client = weft::Connection::connect("127.0.0.1:" + std::to_string(server.port()), {},
                                            weft::Deadline::after(20s));
    auto srv = accepted.get();
    auto target = srv.allocate(64, weft::Access::remote_write);
    auto src = client.allocate(64, weft::Access::local);
    std::memcpy(src->data(), "hello from an installed weft", 29);
    int ctx = 0;
    client.write_notify(src->slice(0, 29), target->remote(), 0, 1, &ctx);
    (void)srv.endpoint().wait_for(weft::Op::notify, weft::Deadline::after(20s));
    if (std::memcmp(target->data(), src->data(), 29) != 0)
        return 1;
    std::printf("consumer ok over %s (weft %s)\n", std::string(client.selection().provider()).c_str(),
                weft::version);
    return 0;
}
