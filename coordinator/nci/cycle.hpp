// One NCI scheduling cycle's model (private to coordinator/nci): the nodes'
// cores, the runs on them and the starts, suspensions and resumes decided
// so far. Its parts: cycle_model.cpp (building and updating the model),
// resume.cpp, start.cpp; stage.cpp drives it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "coordinator/nci/nci.hpp"
#include "coordinator/nci/queue_lookup.hpp"

namespace corral::nci_detail {

constexpr std::uint32_t kNone = ~0u;

struct NodeState {
  int cores = 0;
  bool up = true;
  bool cores_known = true;  // every running job here lists its cores
  bool track_mem = false, track_jobfs = false;
  int idle = 0;
  std::int64_t mem_free = 0, jobfs_free = 0;
  std::vector<std::uint32_t> owner;    // run index on each core, kNone if free
  std::vector<std::uint8_t> claimed;   // core belongs to a suspended job
};

struct Run {
  const Job* job = nullptr;
  const RunningJob* rj = nullptr;  // null for jobs started this pass
  // Running jobs point at the snapshot's placement (no copy per pass); jobs
  // started this pass own theirs.
  const std::vector<Placement>* pl = nullptr;
  std::vector<Placement> own;
  const std::vector<Placement>& placement() const { return pl ? *pl : own; }
  int cpus = 0;
  int prio = 0;
  bool suspended = false;
  bool gone = false;        // stopped (requeued/checkpointed) by an earlier stage
  bool protect = false;     // started/resumed this pass: never a victim
  bool shield = false;      // runs on cores a suspended job waits for: never a victim
  // Started this pass on idle cpus (a tentative start the planner makes):
  // `live` is its pending entry; a larger job further down the queue may
  // reverse it ("that decision may be reversed later in that cycle").
  bool tentative = false;
  bool keep = false;        // tentative but not reversible (pinned, window, suspender)
  std::uint32_t live = ~0u;
  // Suspended: free cores of its own it holds until it resumes (nci_claims).
  std::vector<std::pair<std::uint32_t, int>> held;
  Time projected_end = 0;
};

struct Cycle {
  const Snapshot& snap;
  const NciConfig& cfg;
  Plan& plan;
  std::vector<Queue> queues;
  std::vector<NodeState> nodes;
  std::vector<Run> runs;
  std::unordered_map<std::string, int> run_by_user, run_by_project;
  int total_up_cores = 0;
  int total_idle = 0;
  // Cpus of running jobs that may still be suspended, per runpriority: an
  // O(queues) rejection before any scoring (most jobs of a full cluster).
  std::map<int, long long> victim_cpus;

  Cycle(const Snapshot& s, const NciConfig& c, Plan& p) : snap(s), cfg(c), plan(p) {}

  int prio_of(const std::string& q) const { return runpriority(queues, q); }

  // A Suspend or Resume of run `r` on its own cores, now.
  void decide(Action a, const Run& r, std::string reason) {
    Decision d = decision(a, r.job->id, snap.now, std::move(reason));
    d.slots = r.cpus;
    d.placement = r.placement();
    plan.decisions.push_back(std::move(d));
  }

  void occupy(std::uint32_t ri);

  void release_cores(std::uint32_t ri);

  void hold_memory(const Run& r, int sign);

  // r's share of its memory and jobfs on placement p's node (p.node valid).
  void hold_memory_on(const Run& r, const Placement& p, int sign) {
    NodeState& n = nodes[p.node];
    n.mem_free -= sign * share(r.job->mem_mb, static_cast<int>(p.slots), r.cpus);
    n.jobfs_free -= sign * share(r.job->jobfs_mb, static_cast<int>(p.slots), r.cpus);
  }

  void mark_claimed(const Run& r);

  // Marks the cores of r's placement in `m` (a row per node, sized on first
  // use; an empty row: nothing marked there).
  void mark_cores(std::vector<std::vector<std::uint8_t>>& m, const Run& r) const;

  void build();

  void add_running(const PassState& st);

  // A core a suspended job held for its resume is free again (the caller
  // drops it from that job's `held`).
  void free_held(std::uint32_t hn, int hc);

  // An overdue window job may take the free cores suspended jobs hold for
  // their resume (nci_claims makes no claims in such a pass either).
  void unhold_all();

  std::vector<std::vector<std::uint8_t>> given_;  // cores PBA freed on entry (add_running)

  int owner_running(const Job& j) const;

  // ------------------------------------------------------------ resume --

  bool try_resume(std::uint32_t ri);

  // A job suspended for window_wait or longer resumes now: the running jobs
  // on its cores are suspended in turn and the free cores other suspended
  // jobs hold are taken, so suspended jobs do not starve while overdue
  // window jobs keep arriving (NciConfig::resume_window).
  // Not when a core is unknown or taken by a start/resume of this pass.
  bool force_resume(std::uint32_t ri);

  // ------------------------------------------------------------- start --

  // Cpus node n can give a job of `c` cpus, `m` MB and `f` MB jobfs, given
  // `extra` cores freed there by chosen victims (memory of victims stays held).
  int capacity(const NodeState& n, int extra, int c, const Job& j) const;

  // Chooses nodes and cores for c cpus; `extra` maps node -> cores freed by
  // victims (their cores are preferred). Returns false if it does not fit.
  bool place(const Job& j, int c, const std::unordered_map<std::uint32_t, int>& extra,
             const std::unordered_set<std::uint32_t>& victims, std::vector<Placement>& out);

  // Window: a start-window job; Overdue: one whose window closed
  // window_quantum ago (nci.hpp window_overdue).
  enum class Mode { Priority, Parallel, Window, Overdue };

  bool eligible_victim(const Run& v, const Job& s, int sprio, int c, Mode mode, double score,
                       double xf) const;

  // Tentative starts a job of c cpus at runpriority sprio may reverse: smaller
  // jobs of the same or lower runpriority started on idle cpus earlier in
  // this cycle (parallel-run only: "after consideration of (larger) jobs
  // further down the queue").
  bool reversible(const Run& v, int sprio, int c, Mode mode) const;

  // Tries to start job j (pending entry `li`, c cpus) at runpriority sprio,
  // suspending victims allowed by `mode` (or reversing tentative starts). On
  // success emits the Suspend decisions and updates the model; the start
  // itself is the planner's (see `started`).
  bool try_start(const Job& j, std::uint32_t li, int sprio, Mode mode, const char* why, bool with_victims);

  void commit_start(const Job& j, std::uint32_t li, int c, std::vector<Placement> pl,
                    const std::vector<std::pair<std::uint32_t, std::pair<double, double>>>& victims,
                    const char* why, Mode mode);

  std::vector<JobId> suspended_ids;
  // Per pending entry: 0 not started, 1 tentative start on idle cpus, 2 start
  // decided with victims (it must start this pass: it goes first).
  std::vector<std::uint8_t> started;
  std::vector<std::uint8_t> keep_live;  // entries whose tentative start is never reversed
  std::vector<std::uint32_t> reversed;  // entries whose start was reversed
  long long tentative_cpus = 0;         // cpus of reversible tentative starts
};

}  // namespace corral::nci_detail
