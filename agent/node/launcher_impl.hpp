// The Launcher's private state, shared by the files that implement it:
//   launcher.cpp      construction, the job record files, cleanup, recover()
//   launch.cpp        start(): checks, dirs, environment, the child's setup and exec
//   shepherd_link.cpp the agent's side of the corral-shepherd server and its wake records
//   job_control.cpp   suspend, resume, cancel, requeue, the checkpoint signal
//   job_watch.cpp     poll(): limits, how each job ended; usage()
// Not installed; include only from those files.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "child_fail.hpp"
#include "launcher.hpp"
#include "owner.hpp"

namespace corral::node {

namespace detail {

struct UserInfo {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name, home, shell;
  std::vector<gid_t> groups;
};

std::string errstr(int e);
bool executable_file(const std::string& p);
// A job's checkpoint/jobfs dir is usually empty when it goes: one rmdir, a walk only if not.
void remove_tree(const std::string& dir);
// "cannot start job N: <stage> <what>: <reason> (as user U)" from a child's "<stage>:<errno>".
std::string launch_fail_message(std::uint64_t id, const std::string& report, const std::string& binary,
                                const std::string& cwd, const std::string& out_path, const std::string& err_path,
                                const std::string& user);
// du-like size of a jobfs directory in MB: allocated blocks, no symlinks followed.
std::int64_t du_mb(const std::string& dir);

// What a job's process needs, prepared before any fork: after it only
// async-signal-safe calls are made.
struct ChildSetup {
  UserInfo user;
  bool drop = false;  // setgroups/setgid/setuid to the user
  std::string binary, cwd, out_path, err_path;
  int out_flags = 0;
  mode_t umask = 022;
  bool same_out = false;
  std::vector<std::string> envs;  // KEY=VALUE
  std::vector<char*> argvp, envp;
  std::string exit_file, exit_tmp;
  std::vector<int> cpus;
};

}  // namespace detail

struct Launcher::Impl {
  struct Job {
    LaunchSpec spec;
    pid_t shepherd = -1;
    bool our_child = true;       // false when adopted from another agent process
    bool reaped = false;
    int shepherd_status = 0;
    bool suspended = false;
    std::int64_t acc_ms = 0;          // walltime used before run_started_ms
    std::int64_t run_started_ms = 0;  // when it last started running (valid if !suspended)
    std::optional<EndReason> kill_reason;
    std::string kill_message;
    std::int64_t ckpt_deadline_ms = -1;  // >= 0 while a checkpoint is in progress
    std::string jobfs_dir, ckpt_dir;
    bool own_ckpt_dir = false;           // under ckpt_root: removed when the job ends for good
    std::int64_t jobfs_checked_ms = -1, jobfs_mb_now = 0;
    // Started through the shepherd server: its pid is known once it reports (running/failed).
    bool pid_known = true;
    bool launch_failed = false;
    int pidfd = -1;  // the served job's main process: readable once it has exited (no cgroup reads per poll)
    // Started by the shepherd server, which is the job's parent and reaper: `shepherd` is then the
    // job's own pid (not a separate shepherd process in the slot).
    bool served = false;
    bool end_seen = false;  // the server's "ended" record came (the exit file is written)
    std::optional<int> end_status;  // the wait status that record carried (no exit-file read)
    bool rec_written = false;       // its record exists (later writes go through a temp file)
    // Served, adopted from a record written before the server reported the job's pid (shepherd
    // is then 0): the server it was asked of, and when its slot was first seen empty without an
    // exit file (the server writes that file a moment after the job left its cgroups).
    pid_t server = -1;
    std::int64_t gone_since_ms = -1;
    // The record's mark, a random time set as its mtime: a start request names the record and
    // its mark, and the server drops a request whose record is gone or another by then.
    std::int64_t rec_sec = 0, rec_nsec = 0;
    std::int64_t requested_ms = 0;
    std::string binary, cwd, out_path, err_path;  // for a launch failure's message
  };

  Topology topo;
  LauncherConfig cfg;
  std::unique_ptr<CgroupBackend> cg;
  std::map<std::uint64_t, Job> jobs;
  int wake_r = -1, wake_w = -1;
  std::vector<int> real_cpus;
  std::string shepherd;  // shepherd server binary, "" = fork in-process
  int srv_fd = -1;       // request socket to the shepherd server
  pid_t srv_pid = -1;
  std::vector<pid_t> old_servers;  // servers let go while they still had jobs: reaped once they exit
  bool nudge_owed = false;  // a wake-up was consumed outside poll(): put one back
  std::map<std::string, std::pair<std::int64_t, detail::UserInfo>> users;  // lookups, with their time
  NewFileOwner ckpt_owner;  // no chown of a checkpoint dir already the job user's
  std::uint64_t marks = 0;  // the state of the records' marks (splitmix64)
  // Ended jobs whose cleanup() waits for tidy() (LauncherConfig::defer_cleanup).
  struct Untidy {
    std::uint64_t id;
    bool terminal;
    Job job;
  };
  std::vector<Untidy> untidy;

  std::string slot(std::uint64_t id) const { return slot_name(id); }
  std::string record_path(std::uint64_t id) const { return cfg.state_dir + "/job." + std::to_string(id) + ".rec"; }
  std::string exit_path(std::uint64_t id) const { return cfg.state_dir + "/job." + std::to_string(id) + ".exit"; }
  std::string fail_path(std::uint64_t id) const { return cfg.state_dir + "/job." + std::to_string(id) + ".fail"; }
  std::int64_t used_ms(const Job& j, std::int64_t now) const {
    return j.acc_ms + (j.suspended ? 0 : std::max<std::int64_t>(0, now - j.run_started_ms));
  }

  // ---- launcher.cpp: records, cleanup
  void find_shepherd();
  void save_record(std::uint64_t id, Job& j);
  std::optional<Job> load_record(std::uint64_t id) const;
  // The job's raw wait status as the shepherd recorded it, if it did.
  std::optional<int> read_exit(std::uint64_t id) const;
  // A job asked of a server (record without a pid) that has not shown up yet: waits, briefly and
  // only while that server lives, for it to run, end or fail. True if it runs or ended.
  bool await_requested(std::uint64_t id, const Job& rec) const;
  // A served job whose process exited before its server wrote the status: waits, briefly and
  // only while that server lives, for the status. True once it is there.
  bool await_status(std::uint64_t id, const Job& rec) const;
  // Remove everything a job left: cgroups, jobfs, (ckpt dir if terminal), record, exit file.
  std::string cleanup(std::uint64_t id, const Job& j, bool terminal);
  // Runs the deferred cleanups (all, or only job `only`); returns the failures.
  std::vector<std::string> tidy(std::uint64_t only = 0);

  // ---- launch.cpp: start()
  std::string user_of(const LaunchSpec& spec, detail::UserInfo& u);
  // A stand-in topology's PUs folded onto the real CPUs.
  std::vector<int> map_cpus(const std::vector<int>& pus) const;
  std::string make_dirs(const LaunchSpec& spec, const detail::UserInfo& u, Job& j);
  std::string start_served(const LaunchSpec& spec, Job& j, const detail::ChildSetup& c,
                           const std::vector<std::string>& procs);
  std::string start_forked(const LaunchSpec& spec, Job& j, const detail::ChildSetup& c);

  // ---- shepherd_link.cpp: the shepherd server and wake records
  std::string ensure_server();
  void stop_server();
  // Sends one request, restarting a dead server once; "" or why it could not.
  std::string send_request(const std::string& req);
  void take(const WakeRecord& r);
  bool drain(std::uint64_t want = 0, int timeout_ms = 0);
  void nudge();
  void settle(std::uint64_t id, Job& j);

  // ---- job_control.cpp
  void kill_job(std::uint64_t id, Job& j, EndReason why, std::string msg);

  // ---- job_watch.cpp: limits and ends
  void enforce_limits(std::uint64_t id, Job& j, std::int64_t now);
  void wind_down(std::uint64_t id, Job& j);
  bool ended(std::uint64_t id, Job& j);
  JobEnd finish(std::uint64_t id, Job& j);
  static bool served_gone(const Job& j);
  // Adopted from a record without a pid: ended once the exit file is there, or the slot is
  // empty and (after a grace for the server to write that file) none came.
  bool unseen_ended(std::uint64_t id, Job& j);
};

}  // namespace corral::node
