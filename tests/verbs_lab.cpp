// SPDX-License-Identifier: MIT
// Real verbs devices (the fabric lab, or RDMA hardware): classification and the
// transport's rules as weft applies them. Needs WEFT_LAB_DEVICE (e.g. rxe0) and
// WEFT_LAB_TYPE (rxe, siw or hw); skipped with a message otherwise.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include <rdma/fi_errno.h>

#include "providers/verbs_devices.hpp"
#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;

namespace {

struct Lab {
    std::string device;
    std::string type;
};

std::optional<Lab> lab()
{
    const char* d = std::getenv("WEFT_LAB_DEVICE");
    const char* t = std::getenv("WEFT_LAB_TYPE");
    if (!d || !t)
        return std::nullopt;
    return Lab{d, t};
}

#define WEFT_REQUIRE_LAB(l)                                                                  \
    const auto l = lab();                                                                    \
    if (!l) {                                                                                \
        WARN("SKIPPED: no lab device (set WEFT_LAB_DEVICE and WEFT_LAB_TYPE)");              \
        return;                                                                              \
    }

} // namespace

TEST_CASE("verbs: devices are classified through rdma-core", "[verbs][lab]")
{
    WEFT_REQUIRE_LAB(l);
    const auto devices = providers::verbs_devices();
    const providers::VerbsDevice* dev = nullptr;
    for (const auto& d : devices)
        if (d.name == l->device)
            dev = &d;
    REQUIRE(dev);
    REQUIRE_FALSE(dev->ports.empty());
    const auto& port = dev->ports.front();
    CHECK(port.active);
    CHECK(port.active_mtu >= 256);
    if (l->type == "rxe") {
        CHECK(port.kind == providers::LinkKind::roce_v2);
        CHECK(dev->transport == "InfiniBand");
        CHECK(port.link_layer == "Ethernet");
        CHECK(port.gid_type == "RoCE v2");
        CHECK(port.gid_index >= 0);
        CHECK_THAT(port.gid, Catch::StartsWith("::ffff:")); // IPv4-mapped
        CHECK(dev->max_cqe == 32767);
    } else if (l->type == "siw") {
        CHECK(port.kind == providers::LinkKind::iwarp);
        CHECK(dev->transport == "iWARP");
        CHECK_FALSE(dev->atomics);
    }
}

TEST_CASE("verbs: the transport's rules become quirks and behaviour", "[verbs][lab]")
{
    WEFT_REQUIRE_LAB(l);
    Options o;
    o.provider = "verbs";
    o.node = test::test_address();
    const Selection s = select(o);
    CHECK(s.rdma());
    CHECK(s.info().domain_name() == l->device);
    CHECK_THAT(s.report(), Catch::Contains("device: " + l->device));
    auto p = test::connect_pair({"verbs", EndpointKind::msg});
    Endpoint& ep = p.client.endpoint();
    const Quirks& q = ep.quirks();
    if (l->type == "siw") {
        CHECK(q.read_sink_needs_remote_write);
        CHECK(q.initiator_sends_first);
        CHECK(s.info().cq_data_size() == 0);
        CHECK_FALSE(ep.notify_uses_cq_data()); // write + message
        CHECK_FALSE(ep.supports_atomics());
        CHECK_THAT(s.report(), Catch::Contains("iWARP"));
    } else if (l->type == "rxe") {
        CHECK_FALSE(q.read_sink_needs_remote_write);
        CHECK(ep.notify_uses_cq_data());
        CHECK(q.max_cq_entries == 32767);
        CHECK_THAT(s.report(), Catch::Contains("RoCE v2") && Catch::Contains("GID index"));
    }
    // Whatever the rules, the same code moves the data.
    auto target = p.expose(1 << 16, Access::remote_read_write);
    auto src = p.client.allocate(1 << 16, Access::local);
    test::fill_pattern(src->bytes(), 3);
    int ctx = 0;
    p.client.write_notify(src->slice(0, 1 << 16), target->remote(), 0, 5, &ctx);
    CHECK(p.server.endpoint().wait_for(Op::notify, soon()).data == 5);
    CHECK(std::memcmp(target->data(), src->data(), 1 << 16) == 0);
    (void)ep.wait(&ctx, soon());
}

TEST_CASE("verbs: RDM over ofi_rxm sizes its queues to the device", "[verbs][lab]")
{
    WEFT_REQUIRE_LAB(l);
    // No FI_UNIVERSE_SIZE from the user: weft sets what fits the device.
    auto p = test::connect_pair({"verbs;ofi_rxm", EndpointKind::rdm});
    auto target = p.expose(4096, Access::remote_read_write);
    auto src = p.client.allocate(4096, Access::local);
    test::fill_pattern(src->bytes(), 4);
    int ctx = 0;
    p.client.write(src->all(), target->remote(), 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    p.client.read(src->slice(0, 8), target->remote(), 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    CHECK(std::memcmp(target->data(), src->data(), 4096) == 0);
}
