// An emulated node (corrald --emulate SPEC): a declared shape (cores, sockets, memory, jobfs)
// whose jobs are timers. No hwloc, no cgroups, no shepherd, no processes, nothing that needs
// root: one machine can host many such agents, each a node of a big test mesh. The daemon
// above it is the real one (job store, commands, journal, scheduling, events).
//
// A job runs for the run time its script states in a directive among its leading comment
// lines, then ends with the stated exit code:
//   #CORRAL_EMULATE runtime=90s exit=0
// runtime: 250ms, or a duration (3600, 90s, 30m, 12h, 7d, 2w); default 0 (ends at once).
// exit: 0-255, default 0 (non-zero: the job failed). A run time above the job's walltime ends
// it at the walltime, reason walltime. Suspend stops its timer (and its walltime clock); cancel
// and requeue end it at once; checkpoint ends it at once, and its next run (a restart) only
// has the remaining time to go. Timers do not survive the agent: after a restart its jobs are
// requeued (node_restart), as on a rebooted node.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "topology.hpp"

namespace corral::node {

struct EmulateSpec {
  int cores = 0;             // required
  int sockets = 1;           // packages; each one NUMA node; must divide cores
  std::int64_t mem_mb = 0;   // default 4 GB per core
  std::int64_t jobfs_mb = 0; // default 0: no jobfs limit is checked at submit
};

// "cores=64,sockets=2,mem=256G,jobfs=1T" (sizes as -l mem=: 512mb, 4gb, 1t). Throws
// std::invalid_argument naming the bad part: "emulate 'cores=0': cores: expected 1 to 65536, got '0'".
EmulateSpec parse_emulate_spec(const std::string& text);
// The node the spec describes (source "emulated"), named `hostname`.
Topology emulated_topology(const EmulateSpec& spec, const std::string& hostname);

// What a job's script says of its emulated run (the directive above).
struct EmulatedRun {
  std::int64_t runtime_ms = 0;
  int exit_code = 0;
};
// Reads the directive from `script` (its text). Returns "" or why it is malformed.
std::string parse_emulated_run(const std::string& script, EmulatedRun& out);

class EmulatedNode final : public NodeBackend {
 public:
  using Clock = std::function<std::int64_t()>;  // monotonic ms
  // clock: default the monotonic clock (tests drive their own, with poll(now_ms)).
  explicit EmulatedNode(Topology topo, Clock clock = {});
  ~EmulatedNode() override;
  EmulatedNode(const EmulatedNode&) = delete;
  EmulatedNode& operator=(const EmulatedNode&) = delete;

  // Reads the run time from the script (spec.argv's last word); a malformed directive, an
  // unreadable script, cores out of range or held by a running job refuse the start.
  std::string start(const LaunchSpec& spec) override;
  std::string suspend(std::uint64_t id) override;
  std::string resume(std::uint64_t id) override;
  std::string cancel(std::uint64_t id) override;
  std::string requeue(std::uint64_t id) override;
  std::string checkpoint(std::uint64_t id) override;
  std::vector<JobEnd> poll(std::int64_t now_ms = -1) override;
  std::vector<std::string> tidy() override { return {}; }

  std::optional<JobUsage> usage(std::uint64_t id) const override;
  std::vector<std::uint64_t> jobs() const override;
  bool has(std::uint64_t id) const override { return jobs_.count(id) > 0; }
  std::optional<LaunchSpec> spec(std::uint64_t id) const override;
  // Nothing outlives the agent: no job to adopt, nothing to clean.
  std::vector<Recovered> recover(RecoverMode) override { return {}; }
  void stop_all() override;
  // A timerfd armed at the next timer's end (readable at once when an end waits for poll()).
  int wake_fd() const override { return timer_fd_; }
  const Topology& topology() const override { return topo_; }

 private:
  struct Job {
    LaunchSpec spec;
    EmulatedRun run;
    std::int64_t done_ms = 0;         // run time spent before the current stretch
    std::int64_t stretch_from = 0;    // when the current unsuspended stretch began
    bool suspended = false;
  };
  std::int64_t now() const;
  std::int64_t used_ms(const Job& j, std::int64_t now) const;
  std::int64_t end_at(const Job& j) const;  // clock time it ends if never suspended again
  std::string stop(std::uint64_t id, EndReason why, int exit_code, const std::string& msg);
  void arm(std::int64_t now);

  Topology topo_;
  Clock clock_;
  std::map<std::uint64_t, Job> jobs_;
  std::vector<JobEnd> ended_;                  // ends waiting for poll()
  std::map<std::uint64_t, std::int64_t> saved_ms_;  // a checkpointed job's run time so far
  int timer_fd_ = -1;
};

}  // namespace corral::node
