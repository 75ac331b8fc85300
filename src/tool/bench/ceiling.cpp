// SPDX-License-Identifier: MIT
// The ceiling of shm's large transfers: process_vm_writev (cross-memory
// attach) from this process into another one, as shm does for big RMA writes
// (`weft-raw-bench --cma-ceiling SIZE`, bench/compare.py).
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "child.hpp"
#include "harness.hpp"

namespace weft::bench {

int cma_ceiling(std::size_t size, std::chrono::milliseconds budget)
{
    auto sink_process = detail::Child::fork([size](int to_parent) {
        void* sink = std::aligned_alloc(4096, size);
        std::memset(sink, 0, size);
        const auto addr = reinterpret_cast<std::uintptr_t>(sink);
        (void)!write(to_parent, &addr, sizeof addr);
        pause();
        return 0;
    });
    std::uintptr_t addr = 0;
    if (!sink_process.read_exact(&addr, sizeof addr, Deadline::after(std::chrono::seconds(10))))
        throw std::runtime_error("the process to write into did not start");
    const std::unique_ptr<void, decltype(&std::free)> src(std::aligned_alloc(4096, size), &std::free);
    std::memset(src.get(), 1, size);
    iovec local{src.get(), size};
    iovec remote{reinterpret_cast<void*>(addr), size};
    const pid_t pid = sink_process.pid();
    for (int i = 0; i < 10; ++i)
        (void)process_vm_writev(pid, &local, 1, &remote, 1, 0);
    std::uint64_t n = 0;
    const auto start = Clock::now();
    for (const auto until = start + budget; Clock::now() < until; ++n)
        if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(size))
            throw std::runtime_error(std::string("process_vm_writev: ") + std::strerror(errno));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("{\"tool\": \"cma\", \"bytes\": %zu, \"iterations\": %llu, \"mb_per_s\": %.1f}\n",
                size, static_cast<unsigned long long>(n), static_cast<double>(n * size) / s / 1e6);
    return 0;
}

} // namespace weft::bench
