// What the daemon asks of its node (agent/node_bridge.cpp): start a job on some of its cores,
// suspend, resume, cancel, requeue or checkpoint it, learn each end and why, sample usage, adopt
// running jobs after a restart. Two backends: the Launcher (launcher.hpp: real processes in
// cgroups) and the EmulatedNode (emulated.hpp: a declared node whose jobs are timers). The
// daemon chooses one at setup; its job store, commands, journal and scheduling are the same.
// Threading: a backend is not thread-safe; call it from one thread (the daemon's loop).
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/names.hpp"
#include "topology.hpp"

namespace corral::node {

struct LaunchSpec {
  std::uint64_t id = 0;
  uid_t uid = 0;                  // used if user is empty; else looked up from user
  gid_t gid = 0;
  std::string user;               // submitting user name (preferred: gives uid, gid, groups, HOME)
  std::vector<std::string> argv;  // argv[0] searched in the job's PATH if it has no '/'
  std::map<std::string, std::string> env;
  std::string cwd;                // default: the user's home, else /
  std::string stdout_path, stderr_path;  // opened as the user (so owned by them); default /dev/null
  std::vector<int> cores;         // core indices of the Launcher's topology (whole cores)
  std::int64_t mem_mb = 0;        // 0 = no limit
  std::int64_t jobfs_mb = 0;      // 0 = no private jobfs dir
  std::int64_t walltime_s = 0;    // 0 = no limit
  int ckpt_signal = SIGUSR1;
  int ckpt_grace_s = 30;
  std::string ckpt_dir;           // default <ckpt_root>/<id>; survives requeue
  bool restart = false;           // CORRAL_RESTART=1
  std::string jobfs_root;         // default LauncherConfig::jobfs_root
  std::string hosts;              // CORRAL_HOSTS; default this host
  mode_t umask = 022;             // the job's umask (the submitter's)
};

// LaunchFailed: only with LauncherConfig::async_start, a failure in the job's own process (as its
// user) seen after start() returned; otherwise start() returns the error and this is the daemon's.
// Names: coordinator/names.hpp (Rejected is the daemon's, never the launcher's).
using EndReason = corral::EndReason;

struct JobEnd {
  std::uint64_t id = 0;
  EndReason reason = EndReason::Completed;
  int exit_code = 0;              // exit status, or 128+signal if killed by a signal, -1 unknown
  std::string message;            // human-readable why, e.g. "killed: memory limit 32 MB exceeded"
};

struct JobUsage {
  double cpu_s = 0;
  std::int64_t rss_mb = 0, max_rss_mb = 0;
  std::int64_t jobfs_mb = 0;
  bool running = false, suspended = false;
  std::int64_t walltime_used_ms = 0;  // suspended time excluded
};

enum class RecoverMode { Adopt, Cleanup };
struct Recovered {
  std::uint64_t id = 0;
  bool adopted = false;   // true: now watched again; false: killed and removed
  std::string message;
};

class NodeBackend {
 public:
  virtual ~NodeBackend() = default;

  // Returns "" when the job runs, else why it could not start. A failed start leaves nothing.
  virtual std::string start(const LaunchSpec& spec) = 0;
  // Each returns "" or an error (unknown job, wrong state).
  virtual std::string suspend(std::uint64_t id) = 0;     // walltime clock stops
  virtual std::string resume(std::uint64_t id) = 0;
  virtual std::string cancel(std::uint64_t id) = 0;      // -> Cancelled
  virtual std::string requeue(std::uint64_t id) = 0;     // -> Preempted (back to pending)
  virtual std::string checkpoint(std::uint64_t id) = 0;  // -> Checkpointed
  // The jobs that ended since the last call, with the limits enforced up to now_ms (the
  // backend's monotonic clock; -1 = read it now).
  virtual std::vector<JobEnd> poll(std::int64_t now_ms = -1) = 0;
  // What poll() left to remove (deferred cleanup); one message per failure.
  virtual std::vector<std::string> tidy() = 0;

  virtual std::optional<JobUsage> usage(std::uint64_t id) const = 0;
  virtual std::vector<std::uint64_t> jobs() const = 0;
  virtual bool has(std::uint64_t id) const = 0;
  virtual std::optional<LaunchSpec> spec(std::uint64_t id) const = 0;
  // After a restart: the jobs still running (adopted) and the leftovers removed.
  virtual std::vector<Recovered> recover(RecoverMode mode) = 0;
  virtual void stop_all() = 0;
  // Readable when poll() has something to report (-1: none; the daemon polls on its interval).
  virtual int wake_fd() const = 0;
  virtual const Topology& topology() const = 0;
};

}  // namespace corral::node
