// SPDX-License-Identifier: MIT
// weft-raw-bench: the benchmark patterns written directly against libfabric's C
// API (raw_setup.cpp, raw_patterns.cpp), and the process_vm_writev ceiling of shm.
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <CLI/CLI.hpp>

#include "raw_bench.hpp"

namespace {

// The ceiling of shm's large transfers: process_vm_writev (cross-memory attach)
// from this process into another one, as shm does for big RMA writes.
int cma_ceiling(std::size_t size, std::chrono::milliseconds budget)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    const pid_t child = fork();
    if (child == 0) {
        void* sink = std::aligned_alloc(4096, size);
        std::memset(sink, 0, size);
        const auto addr = reinterpret_cast<std::uintptr_t>(sink);
        (void)!write(fds[1], &addr, sizeof addr);
        pause();
        _exit(0);
    }
    std::uintptr_t addr = 0;
    (void)!read(fds[0], &addr, sizeof addr);
    void* src = std::aligned_alloc(4096, size);
    std::memset(src, 1, size);
    iovec local{src, size};
    iovec remote{reinterpret_cast<void*>(addr), size};
    for (int i = 0; i < 10; ++i)
        (void)process_vm_writev(child, &local, 1, &remote, 1, 0);
    std::uint64_t n = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto until = start + budget;
    while (std::chrono::steady_clock::now() < until) {
        if (process_vm_writev(child, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(size)) {
            std::perror("process_vm_writev");
            break;
        }
        ++n;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    std::printf("{\"tool\": \"cma\", \"bytes\": %zu, \"iterations\": %llu, \"mb_per_s\": %.1f}\n",
                size, static_cast<unsigned long long>(n), static_cast<double>(n * size) / s / 1e6);
    std::free(src);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    CLI::App app{"weft-raw-bench: weft bench's patterns written directly against libfabric's C API"};
    weft::bench::Config cfg;
    weft::bench::add_options(app, cfg);
    std::size_t cma = 0;
    app.add_option("--cma-ceiling", cma,
                   "instead: measure process_vm_writev of SIZE bytes between two processes");
    CLI11_PARSE(app, argc, argv);
    try {
        if (cma)
            return cma_ceiling(cma, cfg.budget);
        return weft::bench::run(cfg, weft::bench::raw_factory());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-raw-bench: %s\n", e.what());
        return 1;
    }
}
