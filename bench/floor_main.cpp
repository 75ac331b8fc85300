// SPDX-License-Identifier: MIT
// weft-floor-bench: what two processes on this host can do through shared
// memory with no library at all, the floor under the same-host lane and UCX's
// posix transport (bench/lane_vs_ucx.py prints it beside them).
//
//   lat-write: each end copies `size` bytes from a buffer of its own into the
//              other's, the last 8 bytes a stamp; the other spins on it and
//              answers (the pattern of weft-pair-bench lat-write and
//              ucx_perftest's put pingpong).
//   lat-read:  one end copies `size` bytes out of the other's buffer (no
//              partner work: a read is one-sided).
//
// Prints one JSON object: {"rows": [{"pattern", "bytes", "usec"}]}, one-way.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t buffer_bytes = 1 << 20;

struct Shared {
    std::atomic<std::uint32_t> go{0};
    alignas(64) std::byte pad[64];
};

std::uint64_t stamp_at(const std::byte* p)
{
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

/// One end of lat-write: `first` sends first. Returns one-way microseconds.
double ping_pong(std::byte* mine, std::byte* theirs, std::byte* src, std::size_t size,
                 std::uint64_t iters, bool first)
{
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t i = 1; i <= iters; ++i) {
        if (!first)
            while (stamp_at(mine + size - 8) != i)
                std::atomic_thread_fence(std::memory_order_acquire);
        std::memcpy(src + size - 8, &i, 8);
        std::memcpy(theirs, src, size - 8);
        std::atomic_thread_fence(std::memory_order_release);
        std::memcpy(theirs + size - 8, src + size - 8, 8); // the stamp last
        if (first)
            while (stamp_at(mine + size - 8) != i)
                std::atomic_thread_fence(std::memory_order_acquire);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s * 1e6 / static_cast<double>(2 * iters);
}

double reads(const std::byte* theirs, std::byte* dst, std::size_t size, std::uint64_t iters)
{
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < iters; ++i) {
        std::memcpy(dst, theirs, size);
        asm volatile("" ::"r"(dst) : "memory"); // the copy is not optimized away
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s * 1e6 / static_cast<double>(iters);
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<std::size_t> sizes{8, 4096};
    std::uint64_t iters = 200000;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-n" && i + 1 < argc) {
            iters = std::strtoull(argv[++i], nullptr, 10);
        } else if (a == "-s" && i + 1 < argc) {
            sizes.clear();
            for (char* p = argv[++i]; *p != '\0';) {
                sizes.push_back(std::strtoull(p, &p, 10));
                if (*p == ',')
                    ++p;
            }
        } else {
            std::fprintf(stderr, "usage: weft-floor-bench [-s 8,4096] [-n iterations]\n");
            return 2;
        }
    }
    for (const std::size_t s : sizes)
        if (s < 8 || s > buffer_bytes) {
            std::fprintf(stderr, "weft-floor-bench: sizes are 8 B to %zu B\n", buffer_bytes);
            return 2;
        }
    // Two buffers each end can reach (a: the parent's, b: the child's), and
    // each end's private source.
    auto* map = static_cast<std::byte*>(::mmap(nullptr, 2 * buffer_bytes + sizeof(Shared),
                                               PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                               -1, 0));
    if (map == MAP_FAILED) {
        std::perror("weft-floor-bench: mmap");
        return 1;
    }
    std::byte* a = map;
    std::byte* b = map + buffer_bytes;
    auto* shared = new (map + 2 * buffer_bytes) Shared;
    std::vector<std::byte> src(buffer_bytes);
    std::string rows;
    for (const std::size_t size : sizes) {
        std::memset(a, 0, buffer_bytes);
        std::memset(b, 0, buffer_bytes);
        const pid_t child = ::fork();
        if (child == 0) {
            std::vector<std::byte> own(buffer_bytes);
            (void)ping_pong(b, a, own.data(), size, iters, false);
            while (shared->go.load(std::memory_order_acquire) == 0) {
            }
            ::_exit(0);
        }
        const double write = ping_pong(a, b, src.data(), size, iters, true);
        const double read = reads(b, src.data(), size, iters);
        shared->go.store(1, std::memory_order_release);
        int status = 0;
        ::waitpid(child, &status, 0);
        shared->go.store(0, std::memory_order_relaxed);
        rows += (rows.empty() ? "" : ",");
        rows += "{\"pattern\":\"lat-write\",\"bytes\":" + std::to_string(size) +
                ",\"usec\":" + std::to_string(write) + "}";
        rows += ",{\"pattern\":\"lat-read\",\"bytes\":" + std::to_string(size) +
                ",\"usec\":" + std::to_string(read) + "}";
    }
    std::printf("{\"rows\":[%s]}\n", rows.c_str());
    return 0;
}
