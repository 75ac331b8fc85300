// SPDX-License-Identifier: MIT
// Provider traits, request parsing, and quirks from fi_info bits.
#include <catch2/catch.hpp>

#include <cstring>

#include "traits.hpp"

using namespace weft;
namespace prov = weft::providers;

TEST_CASE("requests resolve to the right path and kind", "[unit][traits]")
{
    auto r = prov::parse_request("tcp", nullptr);
    CHECK(r.path == "tcp");
    CHECK(r.kind == EndpointKind::msg);
    CHECK_FALSE(r.kind_implied);

    const EndpointKind rdm = EndpointKind::rdm;
    r = prov::parse_request("tcp", &rdm);
    CHECK(r.path == "tcp;ofi_rxm");
    CHECK(r.kind == EndpointKind::rdm);

    r = prov::parse_request("verbs;ofi_rxm", nullptr);
    CHECK(r.kind_implied);
    CHECK(r.kind == EndpointKind::rdm);
    CHECK(r.traits->name == "verbs");

    r = prov::parse_request("shm", nullptr);
    CHECK(r.kind == EndpointKind::rdm);
    CHECK(r.traits->same_host_only);

    r = prov::parse_request("psm3", nullptr); // unknown: passed through
    CHECK(r.path == "psm3");
    CHECK(r.traits->rank == 0);
}

TEST_CASE("the automatic order is verbs, tcp, sockets, with shm on request", "[unit][traits]")
{
    std::vector<std::string> ranked;
    for (const auto* t : prov::all())
        if (t->rank > 0)
            ranked.emplace_back(t->name);
    CHECK(ranked == std::vector<std::string>{"shm", "verbs", "tcp", "sockets"});
    CHECK(prov::traits_for("verbs").rdma);
    CHECK_FALSE(prov::traits_for("tcp;ofi_rxm").rdma);
    CHECK(prov::order_text().find("verbs > tcp > sockets") != std::string::npos);
}

TEST_CASE("quirks follow fi_info bits first, then the traits", "[unit][traits]")
{
    fi_info* info = fi_allocinfo();
    REQUIRE(info);
    info->fabric_attr->prov_name = strdup("verbs");
    info->ep_attr->protocol = FI_PROTO_IWARP;
    info->domain_attr->data_progress = FI_PROGRESS_AUTO;
    auto q = prov::quirks_for(info);
    CHECK(q.read_sink_needs_remote_write);
    CHECK(q.initiator_sends_first);
    CHECK(q.first_message_can_stall);
    CHECK_FALSE(q.target_needs_progress);

    info->ep_attr->protocol = FI_PROTO_RDMA_CM_IB_RC;
    q = prov::quirks_for(info);
    CHECK_FALSE(q.read_sink_needs_remote_write);

    free(info->fabric_attr->prov_name);
    info->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
    info->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    CHECK(prov::quirks_for(info).target_needs_progress);

    info->domain_attr->data_progress = FI_PROGRESS_AUTO;
    free(info->fabric_attr->prov_name);
    info->fabric_attr->prov_name = strdup("tcp");
    CHECK(prov::quirks_for(info).target_needs_progress); // AUTO in name only (measured)

    free(info->fabric_attr->prov_name);
    info->fabric_attr->prov_name = strdup("sockets");
    CHECK_FALSE(prov::quirks_for(info).target_needs_progress);
    fi_freeinfo(info);
}
