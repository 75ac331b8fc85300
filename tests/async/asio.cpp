// SPDX-License-Identifier: MIT
// The Asio adapter: two Nodes pumped by one io_context in one thread,
// operations with use_awaitable and with callbacks, beside a timer, and a
// wait cancelled through Asio's cancellation slot.
#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <thread>

#include "async/support.hpp"
#include "weft/asio.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::Fleet;
using weft::test::soon;

namespace {

Options sleeping()
{
    Options o = test::options_for(test::Case{"tcp", EndpointKind::msg});
    o.waiting = Waiting::sleep;
    return o;
}

} // namespace

TEST_CASE("asio: use_awaitable, a callback and a timer in one io_context", "[async][asio]")
{
    Fleet f(sleeping(), 1, 1 << 16);
    ::asio::io_context io;
    weft::asio::Pump hub_pump(io, f.hub);
    weft::asio::Pump target_pump(io, f.targets[0]);
    auto src = f.hub->allocate(1 << 16, Access::local);
    for (std::size_t i = 0; i < (1 << 16); ++i)
        src->data()[i] = static_cast<std::byte>(i * 13 + 5);
    bool timer_fired = false, callback_ran = false, coroutine_done = false, bytes_right = false;
    std::uint32_t seen = 0;
    ::asio::steady_timer timer(io, 20ms);
    timer.async_wait([&](const std::error_code& ec) { timer_fired = !ec; });
    // The target: a callback for the writer's notification, its bytes checked then.
    weft::asio::async_notification(
        target_pump, f.hub_at[0], soon(), [&, io_thread = std::this_thread::get_id()](std::exception_ptr e, Completion c) {
            callback_ran = !e && std::this_thread::get_id() == io_thread; // on io.run()'s thread
            seen = c.data;
            bytes_right = std::memcmp(f.regions[0]->data(), src->data(), 1 << 16) == 0;
            if (coroutine_done && timer_fired)
                io.stop();
        });
    // The writer: a coroutine, a write then a transfer with its notification.
    ::asio::co_spawn(
        io,
        [&]() -> ::asio::awaitable<void> {
            const Completion c = co_await weft::asio::async_write(
                hub_pump, f.ids[0], src->slice(0, 4096), f.regions[0]->remote(), 0, soon(),
                ::asio::use_awaitable);
            CHECK(c.op == Op::write);
            std::vector<TransferEntry> entries;
            for (std::size_t off = 0; off < (1 << 16); off += 4096)
                entries.push_back({f.ids[0], src->slice(off, 4096), f.regions[0]->remote(), off});
            auto t = Transfer::prepare(f.hub, Direction::write, entries,
                                       Notify{.enabled = true, .value = 77});
            t.post();
            co_await weft::asio::async_wait(hub_pump, t, soon(), ::asio::use_awaitable);
            coroutine_done = true;
            ::asio::steady_timer after(io, 30ms); // the timer has fired by then
            co_await after.async_wait(::asio::use_awaitable);
            if (callback_ran)
                io.stop();
        },
        [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        });
    io.run_for(10s);
    CHECK(timer_fired);
    CHECK(coroutine_done);
    CHECK(callback_ran);
    CHECK(seen == 77);
    CHECK(bytes_right);
}

TEST_CASE("asio: a wait cancelled through its cancellation slot ends at once", "[async][asio][cancel]")
{
    Fleet f(sleeping(), 1, 64);
    ::asio::io_context io;
    weft::asio::Pump pump(io, f.hub);
    ::asio::cancellation_signal cancel;
    int code = 0;
    const auto before = Clock::now();
    weft::asio::async_notification(
        pump, f.ids[0], Deadline::after(30s),
        ::asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, Completion) {
            try {
                if (e)
                    std::rethrow_exception(e);
            } catch (const Error& err) {
                code = err.code();
            }
            io.stop();
        }));
    ::asio::steady_timer timer(io, 30ms);
    timer.async_wait([&](const std::error_code&) { cancel.emit(::asio::cancellation_type::terminal); });
    io.run_for(10s);
    CHECK(code == -FI_ECANCELED);
    CHECK(Clock::now() - before < 5s);
}

TEST_CASE("asio: use_future across threads: the io_context runs on another", "[async][asio]")
{
    Fleet f(sleeping(), 1, 4096);
    ::asio::io_context io;
    weft::asio::Pump hub_pump(io, f.hub);
    weft::asio::Pump target_pump(io, f.targets[0]);
    auto src = f.hub->allocate(4096, Access::local);
    std::memset(src->data(), 0x2d, 4096);
    // Started here, before the io_context's thread exists: then the Node is that thread's alone.
    std::future<Completion> done = weft::asio::async_write(
        hub_pump, f.ids[0], src->slice(0, 4096), f.regions[0]->remote(), 0, soon(), ::asio::use_future);
    std::thread runner([&] { io.run_for(10s); });
    REQUIRE(done.wait_for(10s) == std::future_status::ready);
    CHECK(done.get().op == Op::write);
    io.stop();
    runner.join();
}
