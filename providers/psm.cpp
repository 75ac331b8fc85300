// SPDX-License-Identifier: MIT
// psm: not a provider weft uses, but Debian's libfabric links the psm
// provider's libinfinipath, whose constructor installs its own handlers for
// SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT in every process that loads
// libfabric: a crash then exits with status 1 ("terminated with signal N")
// and leaves PROG.80s-PID,HOST.btr in the working directory, so scripts and
// CI cannot see a crash for what it is. When libweft loads (after libfabric
// and its libraries), it puts back the default action of each signal whose
// handler lives in libinfinipath, and only those: a handler of the
// application's own is never touched. "signals: a crashing weft program dies
// of its signal and leaves no file" checks it for SIGSEGV and SIGABRT.
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <initializer_list>

namespace weft::providers {
namespace {

bool in_infinipath(void* handler)
{
    Dl_info where{};
    return handler && dladdr(handler, &where) != 0 && where.dli_fname &&
           std::strstr(where.dli_fname, "libinfinipath") != nullptr;
}

struct RestoreCrashSignals {
    RestoreCrashSignals() noexcept
    {
        for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
            struct sigaction current{};
            if (sigaction(sig, nullptr, &current) != 0)
                continue;
            void* handler = (current.sa_flags & SA_SIGINFO)
                                ? reinterpret_cast<void*>(current.sa_sigaction)
                                : reinterpret_cast<void*>(current.sa_handler);
            if (in_infinipath(handler)) {
                struct sigaction dfl{};
                dfl.sa_handler = SIG_DFL;
                sigemptyset(&dfl.sa_mask);
                (void)sigaction(sig, &dfl, nullptr);
            }
        }
    }
};

const RestoreCrashSignals restore_crash_signals;

} // namespace
} // namespace weft::providers
