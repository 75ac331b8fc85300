// SPDX-License-Identifier: MIT
// FileStore: a key is a file in a directory every member sees. set() writes a
// temporary file and renames it into place (a reader sees all of a value or
// none); add() holds an flock on the key's lock file around its
// read-modify-write; get() looks again with a growing pause (1 to 10 ms); a
// live key's owner holds an flock on its ".live" file.
#include "weft/stores/store.hpp"
#include "check.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <mutex>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "store_count.hpp"
#include "waits.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace {

[[noreturn]] void fail(std::string_view call, const std::string& path)
{
    const int err = errno;
    detail::throw_error(call, -err, "", fmt::format("{}: check that the store's directory exists "
                                                    "and is writable by every member",
                                                    path));
}

/// The whole file, or false when it does not exist.
bool read_whole(const std::string& path, std::vector<std::byte>& out)
{
    const detail::Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f) {
        if (errno == ENOENT)
            return false;
        fail("open", path);
    }
    out.clear();
    std::byte buf[4096];
    for (;;) {
        const ssize_t n = ::read(f.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail("read", path);
        }
        if (n == 0)
            return true;
        out.insert(out.end(), buf, buf + n);
    }
}

} // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir))
{
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
        fail("mkdir", dir_);
}

std::string FileStore::path(std::string_view call, std::string_view key) const
{
    check_key(call, key);
    // Letters, digits, '-', '_' and '.' (not leading) as they are, any other
    // byte as %XX: every key is one file name, at most 250 bytes (NAME_MAX is
    // 255; the lock file adds ".lock").
    std::string name;
    for (std::size_t i = 0; i < key.size(); ++i) {
        const auto c = static_cast<unsigned char>(key[i]);
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '_' || (c == '.' && i > 0);
        if (plain)
            name += static_cast<char>(c);
        else
            name += fmt::format("%{:02X}", c);
    }
    if (name.size() > 250)
        throw UsageError(std::string(call), -FI_EINVAL, "",
                         fmt::format("key '{}' is too long for a file store ({} bytes as a file "
                                     "name, at most 250)",
                                     key, name.size()));
    return dir_ + "/" + name;
}

void FileStore::write_whole(const std::string& target, std::span<const std::byte> value)
{
    static std::atomic<std::uint64_t> serial{0};
    const std::string tmp = fmt::format("{}/.tmp.{}.{}", dir_, ::getpid(),
                                        serial.fetch_add(1, std::memory_order_relaxed));
    {
        const detail::Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        if (!f)
            fail("open", tmp);
        for (std::size_t done = 0; done < value.size();) {
            const ssize_t n = ::write(f.get(), value.data() + done, value.size() - done);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                ::unlink(tmp.c_str());
                fail("write", tmp);
            }
            done += static_cast<std::size_t>(n);
        }
    }
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
        ::unlink(tmp.c_str());
        fail("rename", target);
    }
}

void FileStore::set(std::string_view key, std::span<const std::byte> value)
{
    write_whole(path("Store::set", key), value);
}

std::vector<std::byte> FileStore::get(std::string_view key, Deadline deadline)
{
    const std::string p = path("Store::get", key);
    std::vector<std::byte> out;
    if (!detail::nap_until(deadline, [&] { return read_whole(p, out); }, std::chrono::milliseconds(1),
                           std::chrono::milliseconds(10)))
        timeout(key);
    return out;
}

std::int64_t FileStore::add(std::string_view key, std::int64_t delta)
{
    const std::string p = path("Store::add", key);
    const std::string lock_path = p + ".lock";
    const detail::Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!lock)
        fail("open", lock_path);
    while (::flock(lock.get(), LOCK_EX) != 0)
        if (errno != EINTR)
            fail("flock", lock_path);
    std::vector<std::byte> v;
    (void)read_whole(p, v);
    const auto was = detail::parse_count(v);
    if (!was)
        not_a_count(key);
    const std::int64_t sum = *was + delta;
    write_whole(p, detail::count_text(sum));
    return sum; // the lock goes with its descriptor
}

FileStore::~FileStore() = default; // each live key's lock goes with its descriptor

void FileStore::set_while_alive(std::string_view key, std::span<const std::byte> value)
{
    const std::string p = path("Store::set_while_alive", key);
    const std::string live_path = p + ".live";
    const std::lock_guard lock(live_m_);
    if (!live_.contains(key)) {
        detail::Fd f(::open(live_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
        if (!f)
            fail("open", live_path);
        if (::flock(f.get(), LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK)
                throw UsageError("Store::set_while_alive", -FI_EBUSY, "",
                                 fmt::format("key '{}' in the {} is held by another live member "
                                             "(its lock file {} is locked)",
                                             key, describe(), live_path));
            fail("flock", live_path);
        }
        live_.emplace(std::string(key), std::move(f));
    }
    write_whole(p, value);
}

bool FileStore::live(std::string_view key)
{
    const std::string p = path("Store::live", key);
    if (!contains(key))
        return false;
    const detail::Fd f(::open((p + ".live").c_str(), O_RDONLY | O_CLOEXEC));
    if (!f)
        return true; // set, not set_while_alive: it stays
    // Its owner holds the lock while it lives; a lock taken here means the
    // owner has ended (or closed its store).
    return ::flock(f.get(), LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
}

bool FileStore::contains(std::string_view key)
{
    struct stat st {};
    return ::stat(path("Store::contains", key).c_str(), &st) == 0;
}

bool FileStore::erase(std::string_view key)
{
    const std::string p = path("Store::erase", key);
    if (::unlink(p.c_str()) == 0)
        return true;
    if (errno != ENOENT)
        fail("unlink", p);
    return false;
}

} // namespace weft
