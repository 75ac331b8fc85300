// SPDX-License-Identifier: MIT
/// @brief Everything weft offers, in one include.
#pragma once

#include "weft/address_vector.hpp"
#include "weft/bootstrap.hpp"
#include "weft/buffer_pool.hpp"
#include "weft/completion_queue.hpp"
#include "weft/connection.hpp"
#include "weft/deadline.hpp"
#include "weft/domain.hpp"
#include "weft/endpoint.hpp"
#include "weft/error.hpp"
#include "weft/event_queue.hpp"
#include "weft/fabric.hpp"
#include "weft/info.hpp"
#include "weft/listener.hpp"
#include "weft/memory_region.hpp"
#include "weft/progress.hpp"
#include "weft/registration_cache.hpp"
#include "weft/remote_region.hpp"
#include "weft/select.hpp"
#include "weft/version.hpp"
