// SPDX-License-Identifier: MIT
// `weft doctor`'s findings, and the checks that live outside doctor.cpp.
#pragma once

#include <string>
#include <string_view>

namespace weft::tool::doctor_checks {

enum class Verdict { ok, note, warn, fail };

inline std::string_view name(Verdict v)
{
    switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::note: return "note";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "FAIL";
    }
    return "?";
}

struct Finding {
    std::string check;
    Verdict verdict;
    std::string detail;
    std::string fix;
};

/// The first line of a file ("" when it cannot be read).
std::string read_first_line(const char* path);
/// Whether shm's cross-process copies (process_vm_readv) work, and what
/// ptrace_scope and CAP_SYS_PTRACE allow (`shm_peer`: a peer's pid to try, or 0).
Finding check_ptrace(int shm_peer);
/// /dev/shm writable, with room for shm's regions.
Finding check_dev_shm();
/// For a group of `ranks` (doctor_group.cpp): RLIMIT_NOFILE against one
/// descriptor per peer, and FI_UNIVERSE_SIZE against ofi_rxm's sizing.
Finding check_open_files(unsigned ranks);
Finding check_universe(unsigned ranks);

} // namespace weft::tool::doctor_checks
