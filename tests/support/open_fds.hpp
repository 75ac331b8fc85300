// SPDX-License-Identifier: MIT
// How many descriptors this process has open: counted before and after, what
// a test leaks shows.
#pragma once

#include <dirent.h>

namespace weft::test {

inline int open_fds()
{
    int n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    while (::readdir(d) != nullptr)
        ++n;
    ::closedir(d);
    return n;
}

} // namespace weft::test
