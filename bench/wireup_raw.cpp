// SPDX-License-Identifier: MIT
// weft-wireup-raw: the reference for a group's wire-up, a plain PMIx modex of
// libfabric endpoint names with nothing of weft (../shared/groups-lab.md):
// PMIx_Init, an RDM endpoint with an FI_AV_TABLE of the job's size,
// fi_getname -> PMIx_Put/Commit/Fence(collect) -> PMIx_Get of every rank ->
// fi_av_insert in rank order, then one message around the ring (every rank
// reached its neighbour), and a fence that keeps reading the queue.
// Run under mpirun; rank 0 prints its times. Argument: the provider
// (default tcp;ofi_rxm).
#include <pmix.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void ok(long ret, const char* what)
{
    if (ret < 0)
        throw std::runtime_error(std::string(what) + ": " + fi_strerror(static_cast<int>(-ret)));
}

void pmix_ok(pmix_status_t rc, const char* what)
{
    if (rc != PMIX_SUCCESS)
        throw std::runtime_error(std::string(what) + ": " + PMIx_Error_string(rc));
}

double ms(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double, std::milli>(b - a).count();
}

/// Reads `cq` until `want` completions (errors throw).
void reap(fid_cq* cq, int want)
{
    const auto until = Clock::now() + std::chrono::seconds(120);
    for (int got = 0; got < want;) {
        fi_cq_entry e[8];
        const ssize_t n = fi_cq_read(cq, e, 8);
        if (n > 0)
            got += static_cast<int>(n);
        else if (n != -FI_EAGAIN)
            ok(n, "fi_cq_read");
        if (Clock::now() > until)
            throw std::runtime_error("no completion in 120 s");
    }
}

} // namespace

int main(int argc, char** argv)
{
    const auto start = Clock::now();
    const char* prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
    try {
        pmix_proc_t me;
        pmix_ok(PMIx_Init(&me, nullptr, 0), "PMIx_Init");
        pmix_proc_t job;
        PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
        pmix_value_t* v = nullptr;
        pmix_ok(PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v), "PMIx_Get(job size)");
        const std::uint32_t size = v->data.uint32;
        PMIX_VALUE_RELEASE(v);

        fi_info* hints = fi_allocinfo();
        hints->ep_attr->type = FI_EP_RDM;
        hints->caps = FI_MSG;
        hints->mode = FI_CONTEXT;
        hints->domain_attr->av_type = FI_AV_TABLE;
        hints->fabric_attr->prov_name = strdup(prov);
        fi_info* info = nullptr;
        ok(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, 0, hints, &info), "fi_getinfo");
        fid_fabric* fabric = nullptr;
        fid_domain* domain = nullptr;
        fid_cq* cq = nullptr;
        fid_av* av = nullptr;
        fid_ep* ep = nullptr;
        ok(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
        ok(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_CONTEXT;
        cq_attr.size = 1024;
        ok(fi_cq_open(domain, &cq_attr, &cq, nullptr), "fi_cq_open");
        fi_av_attr av_attr{};
        av_attr.type = FI_AV_TABLE;
        av_attr.count = size;
        ok(fi_av_open(domain, &av_attr, &av, nullptr), "fi_av_open");
        ok(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
        ok(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
        ok(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
        ok(fi_enable(ep), "fi_enable");
        char name[256];
        size_t len = sizeof name;
        ok(fi_getname(&ep->fid, name, &len), "fi_getname");

        const auto opened = Clock::now();
        pmix_value_t val;
        PMIX_VALUE_CONSTRUCT(&val);
        val.type = PMIX_BYTE_OBJECT;
        val.data.bo.bytes = name;
        val.data.bo.size = len;
        pmix_ok(PMIx_Put(PMIX_GLOBAL, "raw/ep", &val), "PMIx_Put");
        pmix_ok(PMIx_Commit(), "PMIx_Commit");
        pmix_info_t collect;
        bool yes = true;
        PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
        pmix_ok(PMIx_Fence(nullptr, 0, &collect, 1), "PMIx_Fence");
        std::vector<fi_addr_t> addr(size);
        for (std::uint32_t r = 0; r < size; ++r) {
            pmix_proc_t p;
            PMIX_LOAD_PROCID(&p, me.nspace, r);
            pmix_value_t* got = nullptr;
            pmix_ok(PMIx_Get(&p, "raw/ep", nullptr, 0, &got), "PMIx_Get");
            if (fi_av_insert(av, got->data.bo.bytes, 1, &addr[r], 0, nullptr) != 1)
                throw std::runtime_error("fi_av_insert");
            PMIX_VALUE_RELEASE(got);
        }
        const auto exchanged = Clock::now();

        // One message around the ring: every rank has reached its neighbour.
        char in[64];
        char out[64] = "ring";
        fi_context rctx{};
        fi_context sctx{};
        ok(fi_recv(ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, &rctx), "fi_recv");
        for (;;) {
            const ssize_t s = fi_send(ep, out, sizeof out, nullptr, addr[(me.rank + 1) % size], &sctx);
            if (s == 0)
                break;
            if (s != -FI_EAGAIN)
                ok(s, "fi_send");
            (void)fi_cq_read(cq, nullptr, 0); // progress while connecting
        }
        reap(cq, 2);
        const auto reached = Clock::now();

        // The last fence keeps reading the queue (a peer's rxm may need us).
        std::atomic<bool> fenced{false};
        pmix_ok(PMIx_Fence_nb(nullptr, 0, nullptr, 0,
                              [](pmix_status_t, void* flag) {
                                  static_cast<std::atomic<bool>*>(flag)->store(true);
                              },
                              &fenced),
                "PMIx_Fence_nb");
        while (!fenced.load())
            (void)fi_cq_read(cq, nullptr, 0);
        if (me.rank == 0)
            std::printf("raw PMIx modex on %s, %u ranks: open %.1f ms, modex %.1f ms, ring %.1f ms, "
                        "to reached %.1f ms after main\n",
                        info->fabric_attr->prov_name, size, ms(start, opened), ms(opened, exchanged),
                        ms(exchanged, reached), ms(start, reached));
        fi_close(&ep->fid);
        fi_close(&av->fid);
        fi_close(&cq->fid);
        fi_close(&domain->fid);
        fi_close(&fabric->fid);
        fi_freeinfo(info);
        fi_freeinfo(hints);
        PMIx_Finalize(nullptr, 0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-wireup-raw: %s\n", e.what());
        return 1;
    }
}
