// SPDX-License-Identifier: MIT
// A one-node Slurm cluster for the tests (Debian slurm-wlm and munge): munged,
// slurmctld and slurmd started as this process's children, every file in a
// fresh temp directory, on free loopback ports, so that it never meets the
// system's munge or Slurm; jobs, daemons and files go with this object.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "eventually.hpp"
#include "process.hpp"
#include "random.hpp"
#include "sockets.hpp"
#include "temp_dir.hpp"
#include "weft/base/deadline.hpp"

namespace weft::test {

class Slurm {
public:
    /// Why a Slurm cluster cannot run here (not installed, or its daemons do
    /// not start), or nothing: then shared() is up.
    static std::optional<std::string> unavailable()
    {
        // By name: srun and sinfo cannot even say --version without a config.
        if (!succeeds("command -v munged slurmctld slurmd srun sinfo squeue scancel"))
            return "no Slurm or munge here (Debian slurm-wlm, munge; ./weft.sh test installs "
                   "them)";
        try {
            const Slurm& s = shared();
            const Ran list = s.run({"srun", "--mpi=list"}, std::chrono::seconds(10), "mpi");
            if (list.output.find("pmix") == std::string::npos)
                return "this Slurm has no PMIx plugin; srun --mpi=list says: " + list.output;
        } catch (const std::exception& e) {
            return std::string("the Slurm daemons did not start: ") + e.what();
        }
        return std::nullopt;
    }

    /// One cluster for the whole test program, started on first use.
    static Slurm& shared()
    {
        static Slurm s;
        return s;
    }

    /// Starts munged, slurmctld and slurmd and waits (30 s at most) until the
    /// node is idle; throws, with the daemons' output, when they do not come up.
    Slurm()
    {
        try {
            start();
        } catch (...) {
            stop_all();
            throw;
        }
    }
    Slurm(const Slurm&) = delete;
    Slurm& operator=(const Slurm&) = delete;
    ~Slurm() { stop_all(); }

    /// Runs a client command of this cluster (srun, sinfo, ...) for at most
    /// `limit`, killed past it; the result holds its status and output.
    Ran run(std::vector<std::string> argv, std::chrono::seconds limit,
            const std::string& tag) const
    {
        Ran r = test::run({std::move(argv), {"SLURM_CONF=" + conf_}}, limit, tag);
        if (r.timed_out)
            r.output += fmt::format("\n(killed: still running after {} s)\n", limit.count());
        return r;
    }

private:
    void start()
    {
        // munged wants every directory on its socket's path searchable by all
        // ("Socket is inaccessible"), and its key unreadable by others.
        std::filesystem::permissions(dir_, std::filesystem::perms::owner_all |
                                               std::filesystem::perms::group_exec |
                                               std::filesystem::perms::others_exec);
        for (const char* sub : {"state", "spool", "tmp"})
            std::filesystem::create_directory(dir_ + "/" + sub);
        const std::string key = dir_ + "/munge.key";
        write_key(key);
        const std::string socket = dir_ + "/munge.socket";
        // Every daemon in the foreground, so that its pid is the Process's
        // and its output in the Process's log (munged's too).
        munged_.emplace(Command{{"munged", "--foreground", "--key-file=" + key,
                                 "--socket=" + socket, "--pid-file=" + dir_ + "/munged.pid",
                                 "--log-file=" + dir_ + "/munged.log",
                                 "--seed-file=" + dir_ + "/munged.seed"}},
                        "munged");
        const auto until = Deadline::after(std::chrono::seconds(30));
        if (!eventually(until, [&] {
                check_running(*munged_, "munged");
                return std::filesystem::exists(socket);
            }))
            throw std::runtime_error("munged made no socket within 30 s: " + munged_->output());

        write_conf(socket);
        const std::vector<std::string> env = {"SLURM_CONF=" + conf_};
        ctld_.emplace(Command{{"slurmctld", "-D", "-i", "-f", conf_}, env}, "slurmctld");
        slurmd_.emplace(Command{{"slurmd", "-D", "-f", conf_, "-N", host_}, env}, "slurmd");
        // Ready once the controller answers and the node has registered.
        Ran s;
        const bool idle = eventually(
            until,
            [&] {
                check_running(*munged_, "munged");
                check_running(*ctld_, "slurmctld");
                check_running(*slurmd_, "slurmd");
                s = run({"sinfo", "-h", "-o", "%T"}, std::chrono::seconds(10), "sinfo");
                return s.status == 0 && s.output == "idle\n";
            },
            [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
        if (!idle)
            throw std::runtime_error(fmt::format(
                "the node was not idle within 30 s; sinfo: {}; slurmctld: {}; slurmd: {}",
                s.output, ctld_->output(), slurmd_->output()));
    }

    static void write_key(const std::string& path)
    {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
        if (fd < 0)
            throw std::runtime_error("cannot create " + path);
        std::array<std::byte, 128> key{}; // 1024 bits, what mungekey makes
        detail::random_bytes(key, "munge's key");
        const bool ok = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
        ::close(fd);
        if (!ok)
            throw std::runtime_error("cannot write " + path);
    }

    void write_conf(const std::string& munge_socket)
    {
        char name[256] = {};
        ::gethostname(name, sizeof name - 1);
        host_ = name;
        host_ = host_.substr(0, host_.find('.')); // slurmctld knows itself by the short name
        std::ofstream f(conf_);
        // No cgroup.conf: 22.05 refuses CgroupPlugin=disabled, and linuxproc
        // with task/none need none. CPUs=1: a node may have more than its
        // config says, never fewer, and --overcommit runs 8 tasks on one.
        // TmpFS holds PMIx's per-job directories, so two clusters never share.
        // KillWait: a cancelled job's tasks get SIGKILL 2 s after SIGTERM.
        f << fmt::format("ClusterName=weft\n"
                         "SlurmctldHost={0}(127.0.0.1)\n"
                         "SlurmctldPort={1}\n"
                         "SlurmdPort={2}\n"
                         "AuthType=auth/munge\n"
                         "CredType=cred/munge\n"
                         "AuthInfo=socket={3}\n"
                         "SlurmUser=root\n"
                         "SlurmdUser=root\n"
                         "StateSaveLocation={4}/state\n"
                         "SlurmdSpoolDir={4}/spool\n"
                         "TmpFS={4}/tmp\n"
                         "SlurmctldPidFile={4}/slurmctld.pid\n"
                         "SlurmdPidFile={4}/slurmd.pid\n"
                         "SlurmctldLogFile={4}/slurmctld.log\n"
                         "SlurmdLogFile={4}/slurmd.log\n"
                         "ProctrackType=proctrack/linuxproc\n"
                         "TaskPlugin=task/none\n"
                         "JobAcctGatherType=jobacct_gather/none\n"
                         "SelectType=select/cons_tres\n"
                         "KillWait=2\n"
                         "NodeName={0} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n"
                         "PartitionName=debug Nodes={0} Default=YES OverSubscribe=FORCE:8 "
                         "State=UP\n",
                         host_, free_port(), free_port(), munge_socket, dir_);
        if (!f.flush())
            throw std::runtime_error("cannot write " + conf_);
    }

    /// Throws, with its output, if daemon `d` has ended.
    static void check_running(Process& d, const char* name)
    {
        if (d.wait_until(Clock::now()))
            throw std::runtime_error(
                fmt::format("{} exited at start (status {}): {}", name, d.status(), d.output()));
    }

    /// Cancels what is still queued or running (a job whose srun was killed
    /// runs on under its slurmstepd) and waits, 15 s at most, until it is gone.
    void cancel_jobs() const noexcept
    {
        try {
            const auto until = Clock::now() + std::chrono::seconds(15);
            for (bool asked = false;;) {
                const Ran q =
                    run({"squeue", "-h", "-o", "%i"}, std::chrono::seconds(10), "squeue");
                std::istringstream ids(q.output);
                std::vector<std::string> argv = {"scancel"};
                for (std::string id; ids >> id;)
                    argv.push_back(id);
                if (q.status != 0 || argv.size() == 1 || Clock::now() > until)
                    return;
                if (!asked)
                    (void)run(argv, std::chrono::seconds(10), "scancel");
                asked = true;
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        } catch (const std::exception&) { // nothing more to do without the tools
        }
    }

    static bool running(const std::optional<Process>& d) { return d && d->pid() > 0; }

    /// Ends a daemon: SIGTERM, then SIGKILL if it is still there after 15 s.
    static void stop(std::optional<Process>& d) noexcept
    {
        if (running(d))
            d->stop(std::chrono::seconds(15));
    }

    void stop_all() noexcept
    {
        if (running(ctld_) && running(slurmd_))
            cancel_jobs();
        // Both Slurm daemons take about a second to end: let them end together.
        if (running(slurmd_))
            slurmd_->signal(SIGTERM);
        stop(ctld_);
        stop(slurmd_);
        stop(munged_);
    }

    TempDir scratch_{"weft-slurm"}; // first: removed once the daemons are gone
    const std::string dir_ = scratch_.path;
    const std::string conf_ = dir_ + "/slurm.conf";
    std::optional<Process> munged_;
    std::optional<Process> ctld_;
    std::optional<Process> slurmd_;
    std::string host_;
};

} // namespace weft::test
