// SPDX-License-Identifier: MIT
// weft-test-crash SIGNAL: a weft program (it links libweft and touches
// libfabric) that dies of SIGNAL, for faults/crashes.cpp.
#include <csignal>
#include <cstdio>
#include <cstring>

#include "weft/weft.hpp"

int main(int argc, char** argv)
{
    if (argc != 2)
        return 2;
    (void)weft::survey(); // libfabric and its providers are loaded and initialised
    std::fflush(stdout);
    if (std::strcmp(argv[1], "segv") == 0)
        std::raise(SIGSEGV);
    if (std::strcmp(argv[1], "abort") == 0)
        std::abort();
    return 3;
}
