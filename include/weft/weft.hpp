// SPDX-License-Identifier: MIT
/// @brief Everything weft offers, in one include. The headers by layer, bottom
/// up (docs/architecture.md), each opening with what it is for and how it is used:
///
///   base/       error.hpp (Error, TimeoutError, UsageError), deadline.hpp,
///               crc32c.hpp, version.hpp
///   info/       info.hpp (Info, Quirks), options.hpp (Options), diagnostics.hpp
///   select/     select.hpp: the provider chosen at runtime, and why
///   fabric/     the libfabric objects: fabric, domain, event_queue, completion_queue,
///               address_vector, memory_region (and remote_region, buffer_pool,
///               registration_cache), endpoint (and active_endpoint, listener),
///               completions, progress
///   bootstrap/  bootstrap.hpp: the side channel two ends meet on
///   stores/     store.hpp (Store, FileStore), tcp_store.hpp, pmix_store.hpp, etcd_store.hpp
///   peers/      node.hpp (Node: many peers), node_address.hpp, connection.hpp
///               (Server, Connection: two peers)
///   groups/     group.hpp (Group), members.hpp (Members: a service's members)
#pragma once

#include "weft/base/crc32c.hpp"
#include "weft/base/deadline.hpp"
#include "weft/base/error.hpp"
#include "weft/base/version.hpp"
#include "weft/info/diagnostics.hpp"
#include "weft/info/info.hpp"
#include "weft/select/select.hpp"
#include "weft/fabric/address_vector.hpp"
#include "weft/fabric/buffer_pool.hpp"
#include "weft/fabric/completion_queue.hpp"
#include "weft/fabric/completions.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/fabric/event_queue.hpp"
#include "weft/fabric/fabric.hpp"
#include "weft/fabric/listener.hpp"
#include "weft/fabric/memory_region.hpp"
#include "weft/fabric/progress.hpp"
#include "weft/fabric/registration_cache.hpp"
#include "weft/fabric/remote_region.hpp"
#include "weft/bootstrap/bootstrap.hpp"
#include "weft/stores/etcd_store.hpp"
#include "weft/stores/pmix_store.hpp"
#include "weft/stores/store.hpp"
#include "weft/stores/tcp_store.hpp"
#include "weft/peers/connection.hpp"
#include "weft/peers/node.hpp"
#include "weft/peers/node_address.hpp"
#include "weft/groups/group.hpp"
#include "weft/groups/members.hpp"
#include "weft/async/task.hpp"
#include "weft/async/transfer.hpp"
