// Lesson 5: what the service and its members share: where etcd is, and the blocks.
#pragma once

#include <weft/groups/members.hpp>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

constexpr std::uint32_t block = 4096, blocks_max = 16; // a member's inbox holds 16 blocks

inline std::string etcd() // "host:port" of etcd's client URL
{
    const char* at = std::getenv("WEFT_ETCD");
    if (!at)
        throw std::runtime_error("set WEFT_ETCD=host:port to etcd's client address");
    return at;
}
inline std::string service_prefix() // keys under weft-service/<WEFT_SERVICE or demo>/
{
    const char* name = std::getenv("WEFT_SERVICE");
    return std::string("weft-service/") + (name ? name : "demo") + "/";
}
inline weft::Deadline soon() { return weft::Deadline::after(std::chrono::seconds(30)); }

// Byte i of member `name`'s block k (std::hash is the same in every process of this build).
inline std::byte byte_of(const std::string& name, std::size_t k, std::size_t i)
{
    return static_cast<std::byte>(std::hash<std::string>{}(name) + k * 31 + i * 7);
}
inline void fill_block(std::byte* at, const std::string& name, std::size_t k)
{
    for (std::size_t i = 0; i < block; ++i)
        at[i] = byte_of(name, k, i);
}
inline bool block_is(const std::byte* inbox, const std::string& name, std::size_t k)
{
    for (std::size_t i = 0; k < blocks_max && i < block; ++i)
        if (inbox[k * block + i] != byte_of(name, k, i))
            return false;
    return k < blocks_max;
}
