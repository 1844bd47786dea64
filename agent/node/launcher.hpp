// Launching and watching real jobs on this node.
// Each job runs as its submitting user (setgroups from the user's group list, setgid, setuid in
// the child; root only if root submitted), in a new session (so its whole process tree can be
// signalled), inside its slot cgroups (cpuset of whole cores, memory limit, freezer).
// A "shepherd" outside the agent is each job's parent: the corral-shepherd server (one process
// for all jobs; or, as a fallback, a process forked from the agent per job). It waits for the job
// and writes its exit status to the state dir, so a restarted agent can adopt still-running jobs
// and still learn how they ended.
// Limits enforced (NCI policy, seeds/nci-pbs-policy.txt): walltime (suspended time excluded),
// memory (cgroup limit; OOM kill detected and reported), jobfs (size polled, killed above it),
// cpus (cpuset). Every end says why (EndReason + message).
// Threading: a Launcher is not thread-safe; call it from one thread (the daemon's loop).
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "cgroup.hpp"
#include "topology.hpp"

namespace corral::node {

struct LauncherConfig {
  std::string cgroup_parent = "corral";
  std::string cgroup_version = "auto";           // make_cgroup(): auto, v1 or v2
  std::string jobfs_root = "/var/tmp/corral/jobfs";
  std::string ckpt_root = "/var/tmp/corral/ckpt";
  std::string state_dir = "/run/corral/node";   // per-job records + shepherd exit files
  std::string hostname;                          // default: the topology's hostname
  std::int64_t jobfs_check_ms = 1000;            // how often jobfs size is measured
  bool keep_ckpt_on_end = false;  // else the ckpt dir is removed when a job ends for good
  // corral-shepherd binary, posix_spawn()ed once as a server that vforks every job and reaps it
  // (cheap: no fork of the agent, no process but the job per job). Empty: next to the running program (or its
  // node/ subdir), the build path, the install path; "fork" or none found: the shepherd is forked
  // from the agent (slower: copy-on-write of the agent; start() then always waits for the exec).
  std::string shepherd;
  // false: start() waits until the job has exec'd and returns any failure (setuid, chdir, open
  // stdout, execve as the user). true: start() returns once the request is on its way; such a
  // failure comes out of poll() as an end with reason LaunchFailed and the same message (the
  // daemon uses this: its loop never blocks on a launch). Checks done in the agent (user, cwd
  // exists, binary found, cores, cgroups) are returned by start() either way.
  bool async_start = false;
  // true: an ended job's slot cgroups, checkpoint/jobfs dirs and files are removed by tidy(),
  // not inside poll(), so the caller can start the next job on those cores first (corrald:
  // the removal is off the path from one job's end to the next one's start). A start() of the
  // same id, recover(), stop_all() and the destructor tidy first.
  bool defer_cleanup = false;
};

class Launcher final : public NodeBackend {
 public:
  // topo: the node. If it is not the real machine (recorded/declared stand-in), core PUs are
  // mapped onto the real CPUs modulo their count. cg: null = make_cgroup(cgroup_parent, cgroup_version).
  explicit Launcher(Topology topo, LauncherConfig cfg = {}, std::unique_ptr<CgroupBackend> cg = nullptr);
  // Leaves running jobs alone (a restarting agent adopts them); stop_all() stops them first.
  ~Launcher() override;
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Returns "" when the job runs, else why it could not start (unknown user, missing binary,
  // bad cwd, cores out of range, duplicate id...). A failed start leaves nothing behind.
  std::string start(const LaunchSpec& spec) override;

  // Each returns "" or an error (unknown job, wrong state).
  std::string suspend(std::uint64_t id) override;     // freezer FROZEN; walltime clock stops
  std::string resume(std::uint64_t id) override;      // THAWED
  std::string cancel(std::uint64_t id) override;      // kill everything -> Cancelled
  std::string requeue(std::uint64_t id) override;     // kill everything -> Preempted (goes back to pending)
  // Signal the job (spec.ckpt_signal) to write into CORRAL_CKPT_DIR; once it exits, or after
  // ckpt_grace_s, it is stopped -> Checkpointed. Resumes it first if suspended.
  std::string checkpoint(std::uint64_t id) override;

  // Reap ended jobs, enforce walltime/memory/jobfs, finish checkpoints. now_ms: Launcher::now_ms()
  // clock (monotonic); -1 = read it now.
  std::vector<JobEnd> poll(std::int64_t now_ms = -1) override;
  // With defer_cleanup: removes what the jobs poll() ended left behind (slot cgroups, dirs,
  // files). Returns one message per job whose removal failed ("job N: cleanup: why").
  std::vector<std::string> tidy() override;

  std::optional<JobUsage> usage(std::uint64_t id) const override;
  std::vector<std::uint64_t> jobs() const override;
  bool has(std::uint64_t id) const override;
  // What a watched job was started with (after recover(): from its record).
  std::optional<LaunchSpec> spec(std::uint64_t id) const override;

  // After a restart: find the slots left under the cgroup parent. Adopt: jobs with a record whose
  // processes still run are watched again (walltime continues); anything else is killed and
  // removed. Cleanup: kill and remove all of them. Ends of jobs that finished while nobody watched
  // come out of the next poll().
  std::vector<Recovered> recover(RecoverMode mode) override;

  void stop_all() override;            // cancel every job (shutdown without restart)
  int wake_fd() const override;        // readable when a shepherd reports (job running, failed, ended); poll() drains it
  static std::int64_t now_ms();

  const Topology& topology() const override;
  CgroupBackend& cgroups();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::node
