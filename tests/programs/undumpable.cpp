// SPDX-License-Identifier: MIT
// A process that cross-memory attach may not touch: it declares itself not
// dumpable, prints its pid and sleeps until killed (doctor tests).
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

int main()
{
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    std::printf("%d\n", getpid());
    std::fflush(stdout);
    sleep(60);
    return 0;
}
