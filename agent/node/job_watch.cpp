// Watching running jobs: poll() enforces the limits (walltime with suspended
// time excluded, memory, jobfs, the checkpoint grace), notices each end and
// says why it ended; usage() reports what a job uses.
#include "launcher_impl.hpp"

#include <ftw.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>

namespace corral::node {
using namespace detail;

namespace {
thread_local std::int64_t g_du_bytes = 0;
int du_visit(const char*, const struct stat* st, int, struct FTW*) {
  g_du_bytes += static_cast<std::int64_t>(st->st_blocks) * 512;
  return 0;
}


std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + std::to_string(WTERMSIG(st)) + " (" +
                              (strsignal(WTERMSIG(st)) ? strsignal(WTERMSIG(st)) : "?") + ")";
  return "status " + std::to_string(st);
}
int exit_code_of(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}
}  // namespace

std::int64_t detail::du_mb(const std::string& dir) {
  g_du_bytes = 0;
  if (dir.empty() || ::nftw(dir.c_str(), du_visit, 32, FTW_PHYS | FTW_MOUNT) != 0) return 0;
  return g_du_bytes >> 20;
}

// Enforce the limits (walltime, memory, jobfs; cpus are the cpuset's job) and a checkpoint's
// grace. Only the OOM count is read here (one file); the full usage is read once, at the end.
void Launcher::Impl::enforce_limits(std::uint64_t id, Job& j, std::int64_t now) {
  SlotUsage u;
  try {
    if (j.spec.mem_mb > 0) u.oom_kills = cg->oom_kills(slot(id));
    if (u.oom_kills > 0) u = cg->usage(slot(id));
  } catch (const std::exception&) {
  }
  std::int64_t used = used_ms(j, now);
  if (u.oom_kills > 0 && j.spec.mem_mb > 0) {
    kill_job(id, j, EndReason::Memory,
             "killed: memory limit " + std::to_string(j.spec.mem_mb) + " MB exceeded (" +
                 std::to_string(u.oom_kills) + " OOM kill(s), limit hit " + std::to_string(u.failcnt) +
                 " times)");
  } else if (j.spec.walltime_s > 0 && used > j.spec.walltime_s * 1000) {
    kill_job(id, j, EndReason::Walltime,
             "killed: walltime " + std::to_string(j.spec.walltime_s) + " s exceeded (ran " +
                 std::to_string(used) + " ms, suspended time not counted)");
  } else if (j.ckpt_deadline_ms >= 0 && now >= j.ckpt_deadline_ms) {
    kill_job(id, j, EndReason::Checkpointed,
             "checkpoint: job did not exit within the " + std::to_string(j.spec.ckpt_grace_s) +
                 " s grace after signal " + std::to_string(j.spec.ckpt_signal) + "; stopped");
  } else if (j.spec.jobfs_mb > 0 && !j.jobfs_dir.empty() &&
             (j.jobfs_checked_ms < 0 || now - j.jobfs_checked_ms >= cfg.jobfs_check_ms)) {
    j.jobfs_checked_ms = now;
    j.jobfs_mb_now = du_mb(j.jobfs_dir);
    if (j.jobfs_mb_now > j.spec.jobfs_mb)
      kill_job(id, j, EndReason::Jobfs,
               "killed: jobfs " + std::to_string(j.jobfs_mb_now) + " MB used, above its " +
                   std::to_string(j.spec.jobfs_mb) + " MB");
  }
}

std::vector<JobEnd> Launcher::poll(std::int64_t now) {
  Impl& I = *impl_;
  if (now < 0) now = now_ms();
  I.drain();
  I.nudge_owed = false;  // this poll looks at every job
  for (auto it = I.old_servers.begin(); it != I.old_servers.end();) {
    pid_t r = ::waitpid(*it, nullptr, WNOHANG);
    it = r == 0 ? it + 1 : I.old_servers.erase(it);
  }
  std::vector<JobEnd> out;
  for (auto it = I.jobs.begin(); it != I.jobs.end();) {
    const std::uint64_t id = it->first;
    auto& j = it->second;
    if (!j.pid_known) {
      // Asked of the shepherd server, no report yet: normally a few ms; a lost one fails the job.
      if (now - j.requested_ms < 30000) {
        ++it;
        continue;
      }
      j.pid_known = j.launch_failed = true;
    }
    if (!j.reaped && !j.kill_reason) I.enforce_limits(id, j, now);
    bool done = I.ended(id, j);
    if (!done && j.kill_reason) {
      // We killed it: the shepherd dies with the slot; wait for it briefly so the end is reported now.
      for (int i = 0; i < 200 && !done; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        done = I.ended(id, j);
      }
    }
    if (!done) {
      ++it;
      continue;
    }
    out.push_back(I.finish(id, j));
    it = I.jobs.erase(it);
  }
  return out;
}

std::optional<JobUsage> Launcher::usage(std::uint64_t id) const {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return std::nullopt;
  auto& j = it->second;
  JobUsage r;
  SlotUsage u;
  try {
    u = impl_->cg->usage(impl_->slot(id));
  } catch (const std::exception&) {
  }
  r.cpu_s = u.cpu_s;
  r.rss_mb = u.mem_mb;
  r.max_rss_mb = u.max_mem_mb;
  // The size poll() measured last (walking a big jobfs on every status query would be costly).
  r.jobfs_mb = j.jobfs_dir.empty() ? 0 : j.jobfs_checked_ms >= 0 ? j.jobfs_mb_now : du_mb(j.jobfs_dir);
  r.suspended = j.suspended;
  r.running = !j.suspended && !j.reaped;
  r.walltime_used_ms = impl_->used_ms(j, now_ms());
  return r;
}

// Has the shepherd ended? Reaps it if it is our child.
bool Launcher::Impl::ended(std::uint64_t id, Job& j) {
  if (!j.pid_known) return false;  // not started yet (poll() times such a launch out)
  if (j.launch_failed) return true;
  if (j.reaped) return true;
  // Served: the server wrote the status before it reported the end or reaped the job, so the
  // end record (or, for an adopted job, the pid gone) says it all; no exit-file open per poll.
  if (j.served && j.end_seen) return true;
  if (!j.served && read_exit(id)) return true;  // the job's main process ended; finish() winds the rest down
  if (j.served) {
    // Adopted: a pidfd from now on (the record's pid could be reused once the job is reaped).
    if (j.pidfd < 0 && (j.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, j.shepherd, 0))) < 0 && errno == ESRCH)
      return j.reaped = true;
    return j.reaped = served_gone(j);  // gone without a status: its server died
  }
  if (j.pidfd >= 0) {
    struct pollfd p {j.pidfd, POLLIN, 0};
    return j.reaped = ::poll(&p, 1, 0) == 1;  // the shepherd has exited (its pid is not reused)
  }
  if (j.our_child) {
    int st = 0;
    pid_t r = ::waitpid(j.shepherd, &st, WNOHANG);
    if (r == j.shepherd) {
      j.reaped = true;
      j.shepherd_status = st;
      return true;
    }
    if (r == 0) return false;
    j.our_child = false;  // ECHILD: not ours after all (e.g. reaped elsewhere); watch it from outside
  }
  if (::kill(j.shepherd, 0) != 0 && errno == ESRCH) return j.reaped = true;
  // A pid can be reused: an empty cgroup means the shepherd is gone whatever the pid says.
  if (cg->pids(slot(id)).empty()) return j.reaped = true;
  return false;
}

// After the job's main process ended: stop what it left behind, let the shepherd reap it and
// exit (no zombies), reap the shepherd if it is ours.
void Launcher::Impl::wind_down(std::uint64_t id, Job& j) {
  if (j.reaped && j.our_child) return;
  try {
    cg->kill_all(slot(id), 2000, j.shepherd);
  } catch (const std::exception&) {
  }
  // Wait for the shepherd to exit (it does so as soon as its job's processes are gone): a
  // pidfd wakes us at that moment instead of a 5 ms sleep per try. Not our child (the server's):
  // only while it is still in the slot (its pid cannot have been reused then).
  bool in_slot = false;
  if (!j.our_child && j.shepherd > 0 && !j.reaped) {
    try {
      auto p = cg->pids(slot(id));
      in_slot = std::find(p.begin(), p.end(), j.shepherd) != p.end();
    } catch (const std::exception&) {
    }
  }
  if ((j.our_child || in_slot) && !j.reaped) {
    int pfd = static_cast<int>(::syscall(SYS_pidfd_open, j.shepherd, 0));
    if (pfd >= 0) {
      struct pollfd p {pfd, POLLIN, 0};
      while (::poll(&p, 1, 1000) < 0 && errno == EINTR) {}
      ::close(pfd);
    }
  }
  for (int i = 0; i < 200 && j.our_child && !j.reaped; ++i) {
    int st = 0;
    pid_t r = ::waitpid(j.shepherd, &st, WNOHANG);
    if (r == j.shepherd || (r < 0 && errno == ECHILD)) {
      j.reaped = true;
      j.shepherd_status = st;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A served job's process is gone (reaped by its server, which wrote its status first; or by
// init if the server died). Through a pidfd when there is one: immune to pid reuse.
bool Launcher::Impl::served_gone(const Job& j) {
  if (j.pidfd >= 0) return ::syscall(SYS_pidfd_send_signal, j.pidfd, 0, nullptr, 0) != 0 && errno == ESRCH;
  return ::kill(j.shepherd, 0) != 0 && errno == ESRCH;
}

JobEnd Launcher::Impl::finish(std::uint64_t id, Job& j) {
  JobEnd e;
  e.id = id;
  if (j.pidfd >= 0) ::close(j.pidfd);
  j.pidfd = -1;
  if (j.launch_failed) {
    std::ifstream in(fail_path(id));
    std::string report;
    std::getline(in, report);
    e.reason = EndReason::LaunchFailed;
    e.exit_code = -1;
    e.message = report.empty() ? "cannot start job " + std::to_string(id) + ": no report from its shepherd"
                               : launch_fail_message(id, report, j.binary, j.cwd, j.out_path, j.err_path,
                                                     j.spec.user);
    std::string err = cleanup(id, j, !j.spec.restart);
    if (!err.empty()) e.message += "; cleanup: " + err;
    return e;
  }
  // Our own (fork fallback) shepherd is reaped here. A served job's status was written before
  // its server reported the end or reaped it; what the job left is stopped by cleanup().
  if (j.our_child) wind_down(id, j);
  // Only the memory figures are used here (was it the limit that killed it?): no reads without one.
  SlotUsage u;
  try {
    if (j.spec.mem_mb > 0) u = cg->usage(slot(id));
  } catch (const std::exception&) {
  }
  std::optional<int> st = j.end_status ? j.end_status : read_exit(id);
  std::string how;
  if (st) {
    e.exit_code = exit_code_of(*st);
    how = describe_status(*st);
  } else if (j.kill_reason) {
    e.exit_code = 128 + SIGKILL;
    how = "killed by signal 9";
  } else {
    e.exit_code = -1;
    how = "exit status lost (shepherd " + (j.our_child && WIFSIGNALED(j.shepherd_status)
                                               ? describe_status(j.shepherd_status)
                                               : std::string("gone")) + ")";
  }
  bool oom = u.oom_kills > 0 || (st && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL && u.failcnt > 0 &&
                                 j.spec.mem_mb > 0);
  std::string mem_msg = "killed: memory limit " + std::to_string(j.spec.mem_mb) + " MB exceeded (" +
                        std::to_string(u.oom_kills) + " OOM kill(s), limit hit " + std::to_string(u.failcnt) +
                        " times)";
  if (j.kill_reason) {
    e.reason = *j.kill_reason;
    e.message = j.kill_message;
    if (*j.kill_reason == EndReason::Checkpointed && e.message.empty()) e.message = "checkpointed (" + how + ")";
  } else if (j.ckpt_deadline_ms >= 0) {
    e.reason = EndReason::Checkpointed;
    e.message = "checkpointed: exited after the checkpoint signal (" + how + ")";
  } else if (oom) {
    e.reason = EndReason::Memory;
    e.message = mem_msg;
  } else if (st && e.exit_code == 0) {
    e.reason = EndReason::Completed;
    e.message = "completed (exit 0)";
  } else {
    e.reason = EndReason::Failed;
    e.message = "failed: " + how;
  }
  bool terminal = e.reason != EndReason::Preempted && e.reason != EndReason::Checkpointed;
  if (cfg.defer_cleanup) {
    untidy.push_back(Untidy{id, terminal, std::move(j)});
    return e;
  }
  std::string err = cleanup(id, j, terminal);
  if (!err.empty()) e.message += "; cleanup: " + err;
  return e;
}

}  // namespace corral::node
