// SPDX-License-Identifier: MIT
#include "host.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft::lane {
namespace {

[[noreturn]] void fail(const std::string& what)
{
    throw Error("lane", -EIO, "", what + ": the same-host lane needs /proc (mount proc, or "
                                         "leave the lane off)");
}

std::uint64_t ns_inode(const char* path)
{
    struct stat st {};
    if (::stat(path, &st) != 0)
        fail(fmt::format("stat {}: {}", path, std::strerror(errno)));
    return st.st_ino;
}

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

std::array<std::byte, 16> read_boot_id()
{
    const char* path = "/proc/sys/kernel/random/boot_id";
    std::ifstream in(path);
    std::string text;
    if (!(in >> text))
        fail(fmt::format("cannot read {}", path));
    std::array<std::byte, 16> id{};
    std::size_t n = 0;
    int high = -1;
    for (const char c : text) {
        if (c == '-')
            continue;
        const int d = hex_digit(c);
        if (d < 0 || n == id.size())
            fail(fmt::format("{} holds '{}', not a UUID", path, text));
        if (high < 0) {
            high = d;
        } else {
            id[n++] = static_cast<std::byte>(high << 4 | d);
            high = -1;
        }
    }
    if (n != id.size() || high >= 0)
        fail(fmt::format("{} holds '{}', not a UUID", path, text));
    return id;
}

} // namespace

Host this_host()
{
    static const std::array<std::byte, 16> boot = read_boot_id(); // fixed until the next boot
    Host h;
    h.boot_id = boot;
    h.net_ns = ns_inode("/proc/self/ns/net");
    h.pid_ns = ns_inode("/proc/self/ns/pid");
    h.pid = static_cast<std::uint32_t>(::getpid());
    h.uid = static_cast<std::uint32_t>(::geteuid());
    return h;
}

std::string boot_id_text(const std::array<std::byte, 16>& id)
{
    std::string s;
    for (const std::byte b : id)
        s += fmt::format("{:02x}", static_cast<unsigned>(b));
    return s;
}

std::string refusal(const Host& mine, const Host& theirs)
{
    if (mine.boot_id != theirs.boot_id)
        return fmt::format("another host (boot id {} here, {} there)", boot_id_text(mine.boot_id),
                           boot_id_text(theirs.boot_id));
    if (mine.net_ns != theirs.net_ns)
        return fmt::format("this host, another network namespace (net:[{}] here, net:[{}] there): "
                           "abstract AF_UNIX sockets do not cross namespaces",
                           mine.net_ns, theirs.net_ns);
    if (mine.pid_ns != theirs.pid_ns)
        return fmt::format("this host, another pid namespace (pid:[{}] here, pid:[{}] there): "
                           "the peer's pid cannot be checked",
                           mine.pid_ns, theirs.pid_ns);
    return {};
}

} // namespace weft::lane
