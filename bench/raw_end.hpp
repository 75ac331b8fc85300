// SPDX-License-Identifier: MIT
// One end of the raw-libfabric baseline: libfabric's C API as a careful user
// writes it, without weft. raw_setup.cpp opens and connects it (fi_getinfo,
// passive endpoint or address vector, memory registration); raw_patterns.cpp
// is its data path (the benchmark patterns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "raw_bench.hpp"

namespace weft::bench::raw {

/// Throws naming `what` when a libfabric call returned an error.
void ck(long r, const char* what);

class RawEnd final : public End {
public:
    RawEnd(SideChannel side, const Config& cfg) : side_(std::move(side)), cfg_(cfg) {}
    ~RawEnd() override;
    /// Server: choose, listen/open, tell the client, connect.
    void serve_setup(const std::string& host);
    void connect_setup(const std::string& host);
    std::string describe() const override;
    SideChannel& side() override { return side_; }
    double round(const Plan& plan) override;
    void serve(const Plan& plan) override;

private:
    /// fi_getinfo for path_ and msg_ (toward `dest` when given) into info_;
    /// false, with libfabric's error in *error, when the provider has none.
    bool try_getinfo(const std::string& node, const void* dest, std::size_t dest_len,
                     int* error = nullptr);
    void getinfo(const std::string& node, const void* dest, std::size_t dest_len);
    void open_common();
    void open_ep(fi_info* info);
    /// A connection event arrives within the run's timeout or not at all.
    int eq_wait_ms() const;
    std::byte* alloc(std::size_t n);
    fid_mr* reg(std::byte* buf, std::size_t n, std::uint64_t access);
    void prepare(const Plan& plan);
    void barrier();
    /// Reads completions: counts our own finished operations into own_ and
    /// the peer's notifications into remote_data_; reposts consumed receives.
    void reap();
    void repost(void* ctx);
    /// Every wait has a deadline, checked now and then.
    void check_deadline(std::uint32_t& spins, const Deadline& deadline) const;
    void wait_own(std::size_t n);
    void wait_remote_data();
    template <class F>
    void post(F&& f)
    {
        for (;;) {
            const ssize_t r = f();
            if (r == 0)
                return;
            if (r != -FI_EAGAIN)
                ck(r, "post");
            reap();
        }
    }
    void write(std::byte* from, std::size_t size, std::uint64_t offset);
    void writedata(std::byte* from, std::size_t size);
    void lat_write(const Plan& plan);
    void lat_read(const Plan& plan);
    void lat_notify(const Plan& plan);
    void windowed(const Plan& plan);
    void rate(const Plan& plan);
    void cpu_write(const Plan& plan);

    SideChannel side_;
    const Config& cfg_;
    std::string path_;
    bool msg_ = true;
    fi_info* info_ = nullptr;
    fi_info* conn_info_ = nullptr; // kept until the endpoint closes
    std::uint32_t addr_format_ = FI_FORMAT_UNSPEC;
    fid_fabric* fabric_ = nullptr;
    fid_domain* domain_ = nullptr;
    fid_eq* eq_ = nullptr;
    fid_pep* pep_ = nullptr;
    fid_ep* ep_ = nullptr;
    fid_cq* cq_ = nullptr;
    fid_av* av_ = nullptr;
    fi_addr_t peer_ = FI_ADDR_UNSPEC;
    std::vector<fid_mr*> mrs_;
    std::vector<void*> buffers_;
    unsigned mr_mode_ = 0;
    std::size_t inject_ = 0;
    std::uint64_t next_key_ = 0x5eed0000;
    std::byte* recv_buf_ = nullptr;
    void* recv_desc_ = nullptr;
    int recv_ctx_[16] = {};
    std::byte* mine_ = nullptr;
    std::byte* src_ = nullptr;
    void* mine_desc_ = nullptr;
    void* src_desc_ = nullptr;
    std::uint64_t my_key_ = 0;
    std::size_t cap_ = 0;
    std::uint64_t peer_addr_ = 0;
    std::uint64_t peer_key_ = 0;
    std::uint64_t remote_data_ = 0;
    std::uint64_t own_ = 0;
    std::size_t expected_ = 0;
    int ctx_ = 0;
};

} // namespace weft::bench::raw
