// NCI scheduling cycle (nci-pbs-policy.txt, "Job scheduling").
#include "coordinator/nci/nci.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace corral {

std::vector<Queue> nci_default_queues() {
  // "Queue structure": relative charge express 3, normal 1, bonus 0. Bounds are
  // the initial defaults ("Resource limits": varied over time and per project).
  Queue express;
  express.name = "express";
  express.priority = 2;
  express.charge_factor = 3.0;
  express.max_walltime = 24 * 3600;
  express.max_cpus = 64;
  Queue normal;
  normal.name = "normal";
  normal.priority = 1;
  normal.charge_factor = 1.0;
  normal.max_walltime = 48 * 3600;
  normal.max_cpus = 1024;
  Queue bonus = normal;
  bonus.name = "bonus";
  bonus.priority = 0;
  bonus.charge_factor = 0.0;
  return {express, normal, bonus};
}

const Queue* nci_find_queue(const std::vector<Queue>& queues, const std::string& name) {
  for (const Queue& q : queues)
    if (q.name == name) return &q;
  return nullptr;
}

void add_lowest_queue(std::vector<Queue>& qs, const std::string& name) {
  if (nci_find_queue(qs, name)) return;
  Queue q;
  q.name = name;
  int minp = 0;
  for (const Queue& o : qs) minp = std::min(minp, o.priority);
  q.priority = minp - 1;
  q.charge_factor = 0;
  qs.push_back(std::move(q));
}

namespace {

const std::vector<Queue>& table_of(const std::vector<Queue>& queues, const NciConfig& cfg) {
  return queues.empty() ? cfg.queues : queues;
}

const std::string& queue_name(const Job& j, const NciConfig& cfg) {
  return j.queue.empty() ? cfg.default_queue : j.queue;
}

// Runpriority of queue `q` in the table `qs` (0 for a queue it lacks).
int runpriority(const std::vector<Queue>& qs, const std::string& q) {
  const Queue* qq = nci_find_queue(qs, q);
  return qq ? qq->priority : 0;
}

// A decision about `job` at `at` (no slots, no placement).
Decision decision(Action a, JobId job, Time at, std::string reason) {
  Decision d;
  d.action = a;
  d.job = job;
  d.at = at;
  d.reason = std::move(reason);
  return d;
}

std::string bound_error(const char* what, long long v, const Queue& q, long long bound,
                        const char* unit) {
  return std::string(what) + " " + std::to_string(v) + unit + " above queue " + q.name +
         "'s bound of " + std::to_string(bound) + unit;
}

// Share of a whole-job amount carried by k of its n cpus (rounded up, so the
// per-node shares never sum below the whole).
std::int64_t share(std::int64_t total, int k, int n) {
  if (total <= 0 || k <= 0 || n <= 0) return 0;
  return (total * k + n - 1) / n;
}

}  // namespace

NciVerdict validate_request(const Job& job, const std::vector<Queue>& queues, const NciConfig& cfg) {
  NciVerdict v;
  auto fail = [&](std::string r) {
    v.ok = false;
    v.reason = std::move(r);
    return v;
  };
  // "All jobs must have associated requests for the four main limited resources".
  if (cfg.require_walltime && job.walltime <= 0) return fail("walltime missing");
  if (job.walltime < 0) return fail("walltime negative");
  if (job.slots_min < 1) return fail("ncpus missing");
  if (job.slots_max < job.slots_min)
    return fail("ncpus range " + std::to_string(job.slots_min) + "-" +
                std::to_string(job.slots_max) + " is empty");
  if (cfg.require_vmem && job.mem_mb <= 0) return fail("vmem missing");
  if (job.mem_mb < 0) return fail("vmem negative");
  if (cfg.require_jobfs && job.jobfs_mb <= 0) return fail("jobfs missing");
  if (job.jobfs_mb < 0) return fail("jobfs negative");
  const std::string& qn = queue_name(job, cfg);
  const Queue* q = nci_find_queue(table_of(queues, cfg), qn);
  if (!q) return fail("unknown queue " + qn);
  if (q->max_walltime > 0 && job.walltime > q->max_walltime)
    return fail(bound_error("walltime", job.walltime, *q, q->max_walltime, "s"));
  if (q->max_cpus > 0 && job.slots_max > q->max_cpus)
    return fail(bound_error("ncpus", job.slots_max, *q, q->max_cpus, ""));
  if (q->max_mem_mb > 0 && job.mem_mb > q->max_mem_mb)
    return fail(bound_error("vmem", job.mem_mb, *q, q->max_mem_mb, "MB"));
  if (q->max_jobfs_mb > 0 && job.jobfs_mb > q->max_jobfs_mb)
    return fail(bound_error("jobfs", job.jobfs_mb, *q, q->max_jobfs_mb, "MB"));
  return v;
}

std::vector<double> equal_access_scores(const std::vector<const Job*>& pending,
                                        const std::vector<const RunningJob*>& running) {
  // Running jobs are "above" every queued one; sum their cpus per user and per
  // project, then walk the queue adding each job after scoring it. A job of the
  // same user AND project must be counted once: keep the pair sum too.
  std::unordered_map<std::string, double> by_user, by_project;
  std::map<std::pair<std::string, std::string>, double> by_both;
  auto add = [&](const Job& j, double cpus) {
    by_user[j.user] += cpus;
    by_project[j.project] += cpus;
    by_both[{j.user, j.project}] += cpus;
  };
  for (const RunningJob* r : running) add(r->job, held_cpus(*r));
  std::vector<double> out;
  out.reserve(pending.size());
  for (const Job* j : pending) {
    auto get = [](auto& m, const auto& k) {
      auto it = m.find(k);
      return it == m.end() ? 0.0 : it->second;
    };
    out.push_back(get(by_user, j->user) + get(by_project, j->project) -
                  get(by_both, std::make_pair(j->user, j->project)));
    add(*j, j->slots_min);
  }
  return out;
}

double expansion_factor(const RunningJob& victim, Time projected_suspend) {
  const double wall = static_cast<double>(std::max<Time>(victim.job.walltime, 1));
  return (wall + static_cast<double>(victim.suspended_for + std::max<Time>(projected_suspend, 0))) /
         wall;
}

int held_cpus(const RunningJob& rj) { return rj.slots > 0 ? rj.slots : rj.job.slots_min; }

Time walltime_deadline(const RunningJob& rj) {
  return rj.start + rj.job.walltime + rj.suspended_for;
}

double suspension_score(const Job& s, const RunningJob& v, Time now, int s_running, int v_running,
                        const NciConfig& cfg) {
  const SuspendWeights& w = cfg.weights;
  // 1. expansion factor of the victim if suspended for the suspender's walltime.
  const double xf = expansion_factor(v, s.walltime);
  const double span = std::max(cfg.xfactor_limit - 1.0, 1e-6);
  const double fx = (xf - 1.0) / span;
  double score = -w.xfactor * fx * fx;
  // 2. larger jobs have priority over smaller ones.
  const int vc = std::max(held_cpus(v), 1);
  score += w.cpus * std::log2(static_cast<double>(std::max(s.slots_min, 1)) / vc);
  // 3. owners' running jobs; no effect unless the counts differ a lot.
  const double r = std::log2((1.0 + v_running) / (1.0 + s_running));
  score += w.running * (r > 0 ? std::max(0.0, r - 1.0) : std::min(0.0, r + 1.0));
  // 4. fraction done: jobs close to their walltime are kept running.
  const double ran = static_cast<double>(std::max<Time>(now - v.start - v.suspended_for, 0));
  const double done = std::clamp(ran / std::max<double>(static_cast<double>(v.job.walltime), 1.0), 0.0, 1.0);
  score -= w.done * done * done;
  // Start window: the suspender's own expansion factor while it waits
  // ("the expansion factor of jobs starting late ... is modified").
  const double swall = static_cast<double>(std::max<Time>(s.walltime, 1));
  const double pxf = (swall + static_cast<double>(std::max<Time>(now - s.submit, 0))) / swall;
  score += w.wait * (pxf - 1.0);
  return score;
}

bool window_closed(const Job& job, Time now, const NciConfig& cfg) {
  return (cfg.window_cycles > 0 && job.cycles_pending >= cfg.window_cycles) ||
         (cfg.window_wait > 0 && now - job.submit >= cfg.window_wait);
}

// "Job start time window": the time form's guarantee (NciConfig::window_quantum).
bool window_overdue(const Job& job, Time now, const NciConfig& cfg) {
  return cfg.window_wait > 0 && job.first_start < 0 && now - job.submit >= cfg.window_wait + window_quantum(cfg);
}

Time window_quantum(const NciConfig& cfg) {
  if (cfg.window_wait <= 0) return 0;
  return cfg.window_quantum < 0 ? cfg.window_wait : cfg.window_quantum;
}

Time resume_window(const NciConfig& cfg) {
  if (cfg.window_wait <= 0) return 0;
  return cfg.resume_window < 0 ? 3 * cfg.window_wait : cfg.resume_window;
}

bool window_protected(const RunningJob& rj, Time now, const NciConfig& cfg) {
  return cfg.window_wait > 0 && rj.start - rj.job.submit >= cfg.window_wait &&
         now - rj.start < window_quantum(cfg);
}

// Suspended for resume_window or longer: force_resume() in the next cycle.
static bool long_suspended(const RunningJob& rj, Time now, const NciConfig& cfg) {
  const Time r = resume_window(cfg);
  return r > 0 && rj.suspended && rj.suspended_since >= 0 && now - rj.suspended_since >= r;
}

// Claim (and forced resume) order of suspended jobs: higher queue, then the
// most expanded first. With a time window: earliest suspended first (an order that never changes
// while they wait), and each job's cores are kept from the jobs after it
// (fifo_claims), so the first always resumes once its cores' running jobs
// end: no two suspended jobs wait for each other's cores. Measured on KTH:
// with the expansion-factor order, stacked suspensions ended with 30
// suspended jobs holding each other's cores on an idle machine.
static bool fifo_claims(const NciConfig& cfg) { return cfg.window_wait > 0; }

// The most expanded (XFactor so far) first, then by id: the claim order
// without a time window, and the resume order within a queue.
static bool more_expanded(const RunningJob& x, const RunningJob& y) {
  const double xa = expansion_factor(x, 0), xb = expansion_factor(y, 0);
  if (xa != xb) return xa > xb;
  return x.job.id < y.job.id;
}

static bool claims_before(const RunningJob& x, int px, const RunningJob& y, int py, Time now, const NciConfig& cfg) {
  if (fifo_claims(cfg)) {
    const Time sx = x.suspended_since >= 0 ? x.suspended_since : now;
    const Time sy = y.suspended_since >= 0 ? y.suspended_since : now;
    if (sx != sy) return sx < sy;
    return x.job.id < y.job.id;
  }
  (void)now;
  if (px != py) return px > py;
  return more_expanded(x, y);
}

Time window_bound(const NciConfig& cfg) {
  return cfg.window_wait > 0 ? cfg.window_wait + window_quantum(cfg) : 0;
}

namespace {

// Sorts `susp` (indices into snap.running of suspended jobs) into claim order
// (claims_before; the runpriority from the snapshot's queue table, else NCI's).
template <class Index>
void sort_claims(const Snapshot& snap, const NciConfig& cfg, std::vector<Index>& susp) {
  const std::vector<Queue>& qs = table_of(snap.queues, cfg);
  std::vector<std::pair<Index, int>> key;
  key.reserve(susp.size());
  for (Index i : susp) key.push_back({i, runpriority(qs, queue_name(snap.running[i].job, cfg))});
  std::stable_sort(key.begin(), key.end(), [&](const auto& a, const auto& b) {
    return claims_before(snap.running[a.first], a.second, snap.running[b.first], b.second, snap.now, cfg);
  });
  for (std::size_t k = 0; k < key.size(); ++k) susp[k] = key[k].first;
}

// The claim rule: which free cores suspended jobs hold until they resume. A
// suspended job resumes on its own cores (nci-pbs-policy.txt "Job
// scheduling": "attempt to resume suspended jobs"; "Resource limits":
// resources "for both suspended and running jobs must be available"), so the
// free cores of its placement are kept for it, the jobs in claim order: an
// earlier job takes every free core it wants before a later one is asked,
// so with a time window ("Job start time window") a core two suspended jobs
// want goes to the one suspended first (fifo_claims). nci_stage
// (Cycle::add_running) and nci_claims both hand cores out through here, so
// the cores the stage keeps for a suspended job are the ones the planner is
// shown as held.
// `susp`: indices into snap.running of the suspended jobs that may claim. For
// each in claim order, `core(i, p, c)` is called for each core c of each
// placement p on an up node (c in range), then `done(i)`. Whether c is free
// is the caller's to say; a caller takes every free core it is handed (a
// core it passed over would go to a later job in the order).
template <class Core, class Done>
void walk_claims(const Snapshot& snap, const NciConfig& cfg, std::vector<std::size_t> susp, Core core,
                 Done done) {
  sort_claims(snap, cfg, susp);
  for (std::size_t i : susp) {
    for (const Placement& p : snap.running[i].placement) {
      if (p.node >= snap.nodes.size() || !snap.nodes[p.node].up) continue;
      const int ncores = std::max(snap.nodes[p.node].cores, 0);
      for (int c : p.cores)
        if (c >= 0 && c < ncores) core(i, p, c);
    }
    done(i);
  }
}

}  // namespace

// ------------------------------------------------------------------ cycle --

namespace {

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

  void occupy(std::uint32_t ri) {
    Run& r = runs[ri];
    for (const Placement& p : r.placement()) {
      if (p.node >= nodes.size()) continue;
      NodeState& n = nodes[p.node];
      n.idle -= static_cast<int>(p.slots);
      if (n.up) total_idle -= static_cast<int>(p.slots);
      if (p.cores.size() == p.slots) {
        for (int c : p.cores)
          if (c >= 0 && c < n.cores) {
            n.owner[c] = ri;
            n.claimed[c] = 0;
          }
      } else {
        n.cores_known = false;
      }
    }
    run_by_user[r.job->user]++;
    run_by_project[r.job->project]++;
  }

  void release_cores(std::uint32_t ri) {
    Run& r = runs[ri];
    for (const Placement& p : r.placement()) {
      if (p.node >= nodes.size()) continue;
      NodeState& n = nodes[p.node];
      n.idle += static_cast<int>(p.slots);
      if (n.up) total_idle += static_cast<int>(p.slots);
      for (int c : p.cores)
        if (c >= 0 && c < n.cores && n.owner[c] == ri) n.owner[c] = kNone;
    }
    run_by_user[r.job->user]--;
    run_by_project[r.job->project]--;
  }

  void hold_memory(const Run& r, int sign) {
    for (const Placement& p : r.placement())
      if (p.node < nodes.size()) hold_memory_on(r, p, sign);
  }

  // r's share of its memory and jobfs on placement p's node (p.node valid).
  void hold_memory_on(const Run& r, const Placement& p, int sign) {
    NodeState& n = nodes[p.node];
    n.mem_free -= sign * share(r.job->mem_mb, static_cast<int>(p.slots), r.cpus);
    n.jobfs_free -= sign * share(r.job->jobfs_mb, static_cast<int>(p.slots), r.cpus);
  }

  void mark_claimed(const Run& r) {
    for (const Placement& p : r.placement()) {
      if (p.node >= nodes.size()) continue;
      NodeState& n = nodes[p.node];
      for (int c : p.cores)
        if (c >= 0 && c < n.cores && n.owner[c] == kNone) n.claimed[c] = 1;
    }
  }

  // Marks the cores of r's placement in `m` (a row per node, sized on first
  // use; an empty row: nothing marked there).
  void mark_cores(std::vector<std::vector<std::uint8_t>>& m, const Run& r) const {
    for (const Placement& p : r.placement()) {
      if (p.node >= nodes.size()) continue;
      auto& row = m[p.node];
      if (row.empty()) row.assign(nodes[p.node].cores, 0);
      for (int c : p.cores)
        if (c >= 0 && c < nodes[p.node].cores) row[c] = 1;
    }
  }

  void build() {
    queues = table_of(snap.queues, cfg);
    nodes.resize(snap.nodes.size());
    for (std::size_t i = 0; i < snap.nodes.size(); ++i) {
      const Node& sn = snap.nodes[i];
      NodeState& n = nodes[i];
      n.cores = std::max(sn.cores, 0);
      n.up = sn.up;
      n.idle = n.cores;
      n.track_mem = sn.mem_mb > 0;
      n.track_jobfs = sn.jobfs_mb > 0;
      n.mem_free = sn.mem_mb;
      n.jobfs_free = sn.jobfs_mb;
      n.owner.assign(n.cores, kNone);
      n.claimed.assign(n.cores, 0);
      if (n.up) {
        total_up_cores += n.cores;
        total_idle += n.cores;
      }
    }
  }

  void add_running(const PassState& st) {
    std::unordered_set<JobId> freed(st.freed.begin(), st.freed.end());
    std::unordered_set<JobId> suspended_now;
    for (const Decision& d : plan.decisions)
      if (d.action == Action::Suspend) suspended_now.insert(d.job);
    runs.reserve(snap.running.size() + snap.pending.size());
    for (const RunningJob& rj : snap.running) {
      Run r;
      r.job = &rj.job;
      r.rj = &rj;
      r.pl = &rj.placement;
      r.cpus = held_cpus(rj);
      r.prio = prio_of(queue_name(rj.job, cfg));
      r.suspended = rj.suspended;
      r.projected_end = std::max(rj.expected_end, walltime_deadline(rj));
      if (freed.count(rj.job.id)) {
        // Freed by an earlier stage: a suspension keeps memory, a requeue not.
        if (suspended_now.count(rj.job.id)) {
          r.suspended = true;
          r.protect = true;  // do not resume what PBA just suspended
        } else {
          r.gone = true;
        }
      }
      runs.push_back(std::move(r));
      const std::uint32_t ri = static_cast<std::uint32_t>(runs.size() - 1);
      if (runs[ri].gone) continue;
      hold_memory(runs[ri], +1);
      if (!runs[ri].suspended) occupy(ri);
    }
    // A running job on cores a suspended job waits for (typically its
    // suspender) is never suspended in turn: suspensions do not stack, so a
    // suspended job resumes as soon as the jobs on its cores end.
    std::vector<std::vector<std::uint8_t>> waited(nodes.size());
    for (const Run& r : runs)
      if (r.suspended && !r.gone) mark_cores(waited, r);
    for (Run& r : runs) {
      if (r.suspended || r.gone) continue;
      for (const Placement& p : r.placement())
        if (p.node < nodes.size() && !waited[p.node].empty())
          for (int c : p.cores)
            if (c >= 0 && c < nodes[p.node].cores && waited[p.node][c]) r.shield = true;
      if (!r.protect && !r.shield) victim_cpus[r.prio] += r.cpus;
    }
    for (std::uint32_t ri = 0; ri < runs.size(); ++ri)
      if (runs[ri].suspended && !runs[ri].gone) mark_claimed(runs[ri]);
    if (!cfg.claim_suspended_cores) return;
    // A suspended job holds its free cores until it resumes (walk_claims: the
    // same cores nci_claims shows the planner as held). Runs 0.. are
    // snap.running's entries in order: their indices are the same.
    std::vector<std::size_t> susp;
    for (std::uint32_t ri = 0; ri < runs.size(); ++ri)
      if (runs[ri].suspended && !runs[ri].gone && !runs[ri].protect && runs[ri].rj) susp.push_back(ri);
    // Cores freed on entry (PBA's victims) go to the job they were freed for.
    auto& given = given_;
    given.assign(nodes.size(), {});
    for (const Run& r : runs)
      if ((r.gone || r.protect) && r.rj) mark_cores(given, r);
    walk_claims(snap, cfg, std::move(susp), [&](std::size_t i, const Placement& p, int c) {
      NodeState& n = nodes[p.node];
      if (n.owner[c] == kNone && n.idle > 0 && (given[p.node].empty() || !given[p.node][c])) {
        const auto ri = static_cast<std::uint32_t>(i);
        n.owner[c] = ri;
        --n.idle;
        --total_idle;
        runs[ri].held.push_back({p.node, c});
      }
    }, [](std::size_t) {});
  }

  // A core a suspended job held for its resume is free again (the caller
  // drops it from that job's `held`).
  void free_held(std::uint32_t hn, int hc) {
    nodes[hn].owner[hc] = kNone;
    ++nodes[hn].idle;
    if (nodes[hn].up) ++total_idle;
  }

  // An overdue window job may take the free cores suspended jobs hold for
  // their resume (nci_claims makes no claims in such a pass either).
  void unhold_all() {
    for (std::uint32_t ri = 0; ri < runs.size(); ++ri) {
      for (const auto& [hn, hc] : runs[ri].held)
        if (nodes[hn].owner[hc] == ri) free_held(hn, hc);
      runs[ri].held.clear();
    }
  }

  std::vector<std::vector<std::uint8_t>> given_;  // cores PBA freed on entry (add_running)

  int owner_running(const Job& j) const {
    auto get = [](const auto& m, const std::string& k) {
      auto it = m.find(k);
      return it == m.end() ? 0 : it->second;
    };
    return std::max(get(run_by_user, j.user), get(run_by_project, j.project));
  }

  // ------------------------------------------------------------ resume --

  bool try_resume(std::uint32_t ri) {
    Run& r = runs[ri];
    if (!r.suspended) return false;  // resumed already this pass (force_resume)
    for (const Placement& p : r.placement()) {
      if (p.node >= nodes.size()) return false;
      const NodeState& n = nodes[p.node];
      int mine = 0;
      for (const auto& [hn, hc] : r.held) mine += hn == p.node;
      if (!n.up || n.idle + mine < static_cast<int>(p.slots)) return false;
      if (p.cores.size() == p.slots)
        for (int c : p.cores)
          if (c < 0 || c >= n.cores || (n.owner[c] != kNone && n.owner[c] != ri)) return false;
    }
    for (const auto& [hn, hc] : r.held) free_held(hn, hc);  // its held cores become running ones
    r.held.clear();
    r.suspended = false;
    r.protect = true;
    occupy(ri);
    decide(Action::Resume, r, "resources of its suspender are free again");
    return true;
  }

  // A job suspended for window_wait or longer resumes now: the running jobs
  // on its cores are suspended in turn and the free cores other suspended
  // jobs hold are taken, so suspended jobs do not starve while overdue
  // window jobs keep arriving (NciConfig::resume_window).
  // Not when a core is unknown or taken by a start/resume of this pass.
  bool force_resume(std::uint32_t ri) {
    Run& r = runs[ri];
    std::vector<std::uint32_t> victims;
    std::vector<std::pair<std::uint32_t, int>> held_by_other;
    for (const Placement& p : r.placement()) {
      if (p.node >= nodes.size() || !nodes[p.node].up || p.cores.size() != p.slots) return false;
      const NodeState& n = nodes[p.node];
      for (int c : p.cores) {
        if (c < 0 || c >= n.cores) return false;
        // Freed by PBA for an allocated job this pass: that job's.
        if (p.node < given_.size() && !given_[p.node].empty() && given_[p.node][c]) return false;
        const std::uint32_t o = n.owner[c];
        if (o == kNone || o == ri) continue;
        const Run& v = runs[o];
        if (v.suspended) {
          held_by_other.push_back({p.node, c});
          continue;
        }
        if (v.protect || v.gone || !v.rj || v.rj->stopping) return false;
        if (std::find(victims.begin(), victims.end(), o) == victims.end()) victims.push_back(o);
      }
    }
    for (const auto& [hn, hc] : held_by_other) {
      Run& h = runs[nodes[hn].owner[hc]];
      h.held.erase(std::remove(h.held.begin(), h.held.end(), std::make_pair(hn, hc)), h.held.end());
      free_held(hn, hc);
    }
    for (std::uint32_t vi : victims) {
      Run& v = runs[vi];
      release_cores(vi);
      if (!v.shield) victim_cpus[v.prio] -= v.cpus;
      v.suspended = true;
      decide(Action::Suspend, v,
             "suspended for the resume of job " + std::to_string(r.job->id) + " (suspended " +
                 std::to_string(snap.now - r.rj->suspended_since) + " s: its resume window)");
      suspended_ids.push_back(v.job->id);
    }
    const bool ok = try_resume(ri);
    for (std::uint32_t vi : victims) mark_claimed(runs[vi]);
    return ok;
  }

  // ------------------------------------------------------------- start --

  // Cpus node n can give a job of `c` cpus, `m` MB and `f` MB jobfs, given
  // `extra` cores freed there by chosen victims (memory of victims stays held).
  int capacity(const NodeState& n, int extra, int c, const Job& j) const {
    if (!n.up) return 0;
    std::int64_t k = n.idle + extra;
    if (n.track_mem && j.mem_mb > 0)
      k = std::min<std::int64_t>(k, n.mem_free > 0 ? n.mem_free * c / j.mem_mb : 0);
    if (n.track_jobfs && j.jobfs_mb > 0)
      k = std::min<std::int64_t>(k, n.jobfs_free > 0 ? n.jobfs_free * c / j.jobfs_mb : 0);
    return static_cast<int>(std::clamp<std::int64_t>(k, 0, c));
  }

  // Chooses nodes and cores for c cpus; `extra` maps node -> cores freed by
  // victims (their cores are preferred). Returns false if it does not fit.
  bool place(const Job& j, int c, const std::unordered_map<std::uint32_t, int>& extra,
             const std::unordered_set<std::uint32_t>& victims, std::vector<Placement>& out) {
    struct Cand {
      std::uint32_t node;
      int cap;
      int freed;
    };
    std::vector<Cand> cands;
    int total = 0;
    for (std::uint32_t i = 0; i < nodes.size(); ++i) {
      auto it = extra.find(i);
      const int ex = it == extra.end() ? 0 : it->second;
      const int cap = capacity(nodes[i], ex, c, j);
      if (cap > 0) {
        cands.push_back({i, cap, ex});
        total += cap;
      }
    }
    if (total < c) return false;
    // One node if possible (best fit, victims' nodes first); else the largest
    // capacities first (fewest nodes), victims' nodes first.
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      if ((a.freed > 0) != (b.freed > 0)) return a.freed > 0;
      if (a.cap != b.cap) return a.cap > b.cap;
      return a.node < b.node;
    });
    const Cand* single = nullptr;
    for (const Cand& k : cands)
      if (k.cap >= c && (!single || (k.freed > 0) > (single->freed > 0) ||
                         ((k.freed > 0) == (single->freed > 0) && k.cap < single->cap)))
        single = &k;
    std::vector<std::pair<std::uint32_t, int>> take;
    if (single) {
      take.push_back({single->node, c});
    } else {
      int left = c;
      for (const Cand& k : cands) {
        if (left == 0) break;
        const int t = std::min(left, k.cap);
        take.push_back({k.node, t});
        left -= t;
      }
    }
    out.clear();
    for (auto [ni, k] : take) {
      NodeState& n = nodes[ni];
      Placement p;
      p.node = ni;
      p.slots = static_cast<std::uint32_t>(k);
      if (n.cores_known) {
        // Victims' cores first, then unclaimed free cores, then cores a
        // suspended job will want back.
        std::vector<int> order;
        for (int pass = 0; pass < 3 && static_cast<int>(order.size()) < k; ++pass)
          for (int ci = 0; ci < n.cores && static_cast<int>(order.size()) < k; ++ci) {
            const std::uint32_t o = n.owner[ci];
            const bool victim = o != kNone && victims.count(o);
            if (pass == 0 ? victim : pass == 1 ? (o == kNone && !n.claimed[ci])
                                               : (o == kNone && n.claimed[ci]))
              order.push_back(ci);
          }
        if (static_cast<int>(order.size()) == k) p.cores = std::move(order);
      }
      out.push_back(std::move(p));
    }
    return true;
  }

  // Window: a start-window job; Overdue: one whose window closed
  // window_quantum ago (nci.hpp window_overdue).
  enum class Mode { Priority, Parallel, Window, Overdue };

  bool eligible_victim(const Run& v, const Job& s, int sprio, int c, Mode mode, double score,
                       double xf) const {
    if (v.gone || v.suspended || v.protect || !v.rj) return false;
    switch (mode) {
      case Mode::Priority:
        return v.prio < sprio;
      case Mode::Parallel:
        return v.prio <= sprio && v.cpus < c && score >= cfg.parallel_min_score &&
               xf <= cfg.xfactor_limit;
      case Mode::Window:
      case Mode::Overdue:
        return true;
    }
    (void)s;
    return false;
  }

  // Tentative starts a job of c cpus at runpriority sprio may reverse: smaller
  // jobs of the same or lower runpriority started on idle cpus earlier in
  // this cycle (parallel-run only: "after consideration of (larger) jobs
  // further down the queue").
  bool reversible(const Run& v, int sprio, int c, Mode mode) const {
    return cfg.reverse_starts && mode == Mode::Parallel && v.tentative && !v.keep && !v.gone &&
           v.prio <= sprio && v.cpus < c;
  }

  // Tries to start job j (pending entry `li`, c cpus) at runpriority sprio,
  // suspending victims allowed by `mode` (or reversing tentative starts). On
  // success emits the Suspend decisions and updates the model; the start
  // itself is the planner's (see `started`).
  bool try_start(const Job& j, std::uint32_t li, int sprio, Mode mode, const char* why, bool with_victims) {
    const int cmin = std::max(j.slots_min, 1);
    const int cmax = std::max(j.slots_max, cmin);
    std::vector<Placement> pl;
    static const std::unordered_map<std::uint32_t, int> kNoExtra;
    static const std::unordered_set<std::uint32_t> kNoVictims;
    if (!with_victims) {
      if (total_idle < cmin) return false;
      // Largest slot count of the range that fits now (PE ranges).
      for (int c : {cmax, cmin}) {
        if (c > total_idle) continue;
        if (place(j, c, kNoExtra, kNoVictims, pl)) {
          commit_start(j, li, c, std::move(pl), {}, why, mode);
          return true;
        }
      }
      return false;
    }
    const int c = cmin;
    // Candidate victims, most favoured first: reversible tentative starts
    // (nothing is suspended for them), then those whose expansion factor
    // stays below the limit, then by suspension score.
    struct Cand {
      std::uint32_t ri;
      double score;
      double xf;
    };
    std::vector<Cand> cands;
    long long quick = total_idle;
    for (const auto& [pr, n] : victim_cpus)
      if (mode == Mode::Window || (mode == Mode::Priority ? pr < sprio : pr <= sprio)) quick += n;
    if (mode == Mode::Parallel) quick += tentative_cpus;
    if (mode != Mode::Overdue && quick < c) return false;  // shielded jobs are not counted there
    int reach = total_idle;
    const int srun = owner_running(j);
    for (std::uint32_t ri = 0; ri < runs.size(); ++ri) {
      const Run& v = runs[ri];
      if (reversible(v, sprio, c, mode)) {
        cands.push_back({ri, std::numeric_limits<double>::infinity(), 1.0});
        reach += v.cpus;
        continue;
      }
      if (v.gone || v.suspended || v.protect || !v.rj) continue;
      // Suspensions do not stack, except for an overdue window job.
      if (v.shield && mode != Mode::Overdue) continue;
      if (mode == Mode::Priority && v.prio >= sprio) continue;
      // A window start keeps its quantum against later window jobs.
      if (mode == Mode::Window && window_protected(*v.rj, snap.now, cfg)) continue;
      const double xf = expansion_factor(*v.rj, j.walltime);
      const double sc = suspension_score(j, *v.rj, snap.now, srun, owner_running(*v.job), cfg);
      if (!eligible_victim(v, j, sprio, c, mode, sc, xf)) continue;
      cands.push_back({ri, sc, xf});
      reach += v.cpus;
    }
    if (reach < c || cands.empty()) return false;
    auto worse = [&](const Cand& a, const Cand& b) {
      const bool ao = a.xf <= cfg.xfactor_limit, bo = b.xf <= cfg.xfactor_limit;
      if (ao != bo) return bo;
      if (a.score != b.score) return a.score < b.score;
      return runs[a.ri].job->id > runs[b.ri].job->id;
    };
    // A heap: only the few victims actually needed get ordered.
    std::make_heap(cands.begin(), cands.end(), worse);
    // Add victims until the job fits (running total of per-node capacity).
    std::unordered_map<std::uint32_t, int> extra;
    std::vector<int> cap(nodes.size());
    long long total = 0;
    for (std::uint32_t i = 0; i < nodes.size(); ++i) {
      cap[i] = capacity(nodes[i], 0, c, j);
      total += cap[i];
    }
    auto apply = [&](std::uint32_t ri, int sign) {
      const Run& v = runs[ri];
      for (const Placement& p : v.placement()) {
        if (p.node >= nodes.size()) continue;
        int& ex = extra[p.node];
        ex += sign * static_cast<int>(p.slots);
        // A reversed start gives its memory back too; a suspended job keeps it.
        if (v.tentative) hold_memory_on(v, p, -sign);
        total -= cap[p.node];
        cap[p.node] = capacity(nodes[p.node], ex, c, j);
        total += cap[p.node];
      }
    };
    std::vector<Cand> picked;
    std::vector<std::size_t> chosen;
    while (!cands.empty() && total < c) {
      std::pop_heap(cands.begin(), cands.end(), worse);
      picked.push_back(cands.back());
      cands.pop_back();
      apply(picked.back().ri, +1);
      chosen.push_back(picked.size() - 1);
    }
    auto undo_all = [&] {
      for (std::size_t k : chosen) apply(picked[k].ri, -1);
    };
    if (total < c) {
      undo_all();
      return false;
    }
    // Drop victims that turn out unnecessary, least favoured first.
    for (std::size_t i = chosen.size(); i-- > 0;) {
      apply(picked[chosen[i]].ri, -1);
      if (total >= c) {
        chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        apply(picked[chosen[i]].ri, +1);
      }
    }
    std::unordered_set<std::uint32_t> victims;
    for (std::size_t k : chosen) victims.insert(picked[k].ri);
    for (auto it = extra.begin(); it != extra.end();)
      it = it->second == 0 ? extra.erase(it) : std::next(it);
    const bool ok = place(j, c, extra, victims, pl);
    undo_all();  // commit_start applies the real changes
    if (!ok) return false;
    std::vector<std::pair<std::uint32_t, std::pair<double, double>>> vs;
    for (std::size_t k : chosen) vs.push_back({picked[k].ri, {picked[k].score, picked[k].xf}});
    commit_start(j, li, c, std::move(pl), vs, why, mode);
    return true;
  }

  void commit_start(const Job& j, std::uint32_t li, int c, std::vector<Placement> pl,
                    const std::vector<std::pair<std::uint32_t, std::pair<double, double>>>& victims,
                    const char* why, Mode mode) {
    bool reversed_any = false;
    for (const auto& [ri, sx] : victims) {
      Run& v = runs[ri];
      if (v.tentative) {
        // "that decision may be reversed later in that cycle": the smaller
        // job goes back to the queue, nothing is suspended.
        release_cores(ri);
        hold_memory(v, -1);
        tentative_cpus -= v.cpus;
        v.gone = true;
        v.tentative = false;
        started[v.live] = 0;
        reversed.push_back(v.live);
        reversed_any = true;
        continue;
      }
      release_cores(ri);
      if (!v.shield) victim_cpus[v.prio] -= v.cpus;
      v.suspended = true;
      mark_claimed(v);
      char buf[160];
      std::snprintf(buf, sizeof buf, "suspended for job %llu (%s, XFactor %.2f, score %.2f)",
                    static_cast<unsigned long long>(j.id),
                    mode == Mode::Priority ? "priority-run"
                    : mode == Mode::Parallel ? "parallel-run"
                    : mode == Mode::Window   ? "start window"
                                             : "start window overdue",
                    sx.second, sx.first);
      decide(Action::Suspend, v, buf);
      suspended_ids.push_back(v.job->id);
    }
    if (reversed_any)  // a reversed start may have sat on a suspended job's cores
      for (const Run& r : runs)
        if (r.suspended && !r.gone) mark_claimed(r);
    Run r;
    r.job = &j;
    r.own = std::move(pl);
    r.cpus = c;
    r.prio = prio_of(queue_name(j, cfg));
    r.protect = true;
    r.live = li;
    r.projected_end = snap.now + j.walltime;
    // A start that needed victims is decided for this pass; an idle-cpu start
    // is tentative (a larger job further down may still reverse it).
    r.tentative = victims.empty();
    r.keep = !r.tentative || (li < keep_live.size() && keep_live[li]);
    runs.push_back(std::move(r));
    const auto ri = static_cast<std::uint32_t>(runs.size() - 1);
    hold_memory(runs[ri], +1);
    occupy(ri);
    if (runs[ri].tentative && !runs[ri].keep) tentative_cpus += c;
    if (li < started.size()) started[li] = victims.empty() ? 1 : 2;
    (void)why;
  }

  std::vector<JobId> suspended_ids;
  // Per pending entry: 0 not started, 1 tentative start on idle cpus, 2 start
  // decided with victims (it must start this pass: it goes first).
  std::vector<std::uint8_t> started;
  std::vector<std::uint8_t> keep_live;  // entries whose tentative start is never reversed
  std::vector<std::uint32_t> reversed;  // entries whose start was reversed
  long long tentative_cpus = 0;         // cpus of reversible tentative starts
};

}  // namespace

void nci_stage(const Snapshot& snap, const NciConfig& cfg, std::uint64_t seed, PassState& st,
               Plan& plan) {
  (void)seed;  // ties keep the FIFO order handed in, which is already repeatable
  Cycle cy(snap, cfg, plan);
  cy.build();
  cy.add_running(st);

  // 1. Mandatory requests and bounds; projects without grant go to bonus.
  struct P {
    std::uint32_t idx;
    std::string queue;
    int prio;
    bool must;
    bool overdue;
  };
  std::vector<P> live;
  live.reserve(st.order.size());
  const Queue* bonus = nci_find_queue(cy.queues, cfg.bonus_queue);
  for (std::uint32_t idx : st.order) {
    if (idx >= snap.pending.size()) continue;
    const Job& j = snap.pending[idx];
    NciVerdict v = validate_request(j, cy.queues, cfg);
    if (v.ok && j.slots_min > cy.total_up_cores)
      v = {false, "ncpus " + std::to_string(j.slots_min) + " above the cluster's " +
                      std::to_string(cy.total_up_cores) + " cpus"};
    if (!v.ok) {
      plan.decisions.push_back(decision(Action::Reject, j.id, snap.now, v.reason));
      continue;
    }
    std::string q = queue_name(j, cfg);
    auto g = cfg.grant_left.find(j.project);
    if (bonus && q != bonus->name && g != cfg.grant_left.end() && g->second <= 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f", g->second);
      Decision d = decision(Action::Demote, j.id, snap.now,
                            "project " + j.project + " has no grant left (" + buf + " SU): runs in " +
                                bonus->name + " on idle cpus");
      d.queue = bonus->name;
      plan.decisions.push_back(std::move(d));
      q = bonus->name;
    }
    const bool must = window_closed(j, snap.now, cfg);
    live.push_back({idx, q, cy.prio_of(q), must, must && window_overdue(j, snap.now, cfg)});
  }

  // 2. Equal-access shuffle of each queue, queues in priority order.
  std::map<std::string, std::vector<std::size_t>> by_queue;  // into live
  for (std::size_t i = 0; i < live.size(); ++i) by_queue[live[i].queue].push_back(i);
  std::map<std::string, std::vector<const RunningJob*>> running_by_queue;
  for (const RunningJob& rj : snap.running) running_by_queue[queue_name(rj.job, cfg)].push_back(&rj);
  std::vector<std::size_t> order;  // into live
  std::vector<std::string> qnames;
  for (auto& [qn, v] : by_queue) qnames.push_back(qn);
  std::stable_sort(qnames.begin(), qnames.end(), [&](const std::string& a, const std::string& b) {
    return cy.prio_of(a) > cy.prio_of(b);
  });
  for (const std::string& qn : qnames) {
    std::vector<std::size_t>& members = by_queue[qn];
    std::vector<const Job*> jobs;
    for (std::size_t i : members) jobs.push_back(&snap.pending[live[i].idx]);
    const std::vector<double> score = equal_access_scores(jobs, running_by_queue[qn]);
    std::vector<std::size_t> pos(members.size());
    std::iota(pos.begin(), pos.end(), 0);
    std::stable_sort(pos.begin(), pos.end(), [&](std::size_t a, std::size_t b) {
      const double ka = score[a] - cfg.age_cpus_per_cycle * jobs[a]->cycles_pending;
      const double kb = score[b] - cfg.age_cpus_per_cycle * jobs[b]->cycles_pending;
      return ka < kb;
    });
    for (std::size_t p : pos) order.push_back(members[p]);
  }

  // 3. Attempt order ("Job selection"): jobs an earlier stage pinned first
  // (PBA's allocated class, st.pinned) in their order; then start-window
  // jobs (longest waiting first); then, for each queue in priority order,
  // resume its suspended jobs (their suspender may have completed) and try
  // its queued jobs in shuffled order.
  const std::size_t npin = std::min(st.pinned, st.order.size());
  std::vector<std::uint8_t> pinned(live.size(), 0);
  {
    std::unordered_set<std::uint32_t> pin(st.order.begin(), st.order.begin() + static_cast<std::ptrdiff_t>(npin));
    for (std::size_t i = 0; i < live.size(); ++i) pinned[i] = pin.count(live[i].idx) > 0;
  }
  std::vector<std::size_t> first;  // pinned, in the order handed in (live is in that order)
  for (std::size_t i = 0; i < live.size(); ++i)
    if (pinned[i]) first.push_back(i);
  std::vector<std::size_t> must;
  for (std::size_t i : order)
    if (!pinned[i] && live[i].must) must.push_back(i);
  std::stable_sort(must.begin(), must.end(), [&](std::size_t a, std::size_t b) {
    const Job& x = snap.pending[live[a].idx];
    const Job& y = snap.pending[live[b].idx];
    // Overdue jobs first, in window-close order (their guarantee).
    if (live[a].overdue != live[b].overdue) return live[a].overdue;
    // Longest waiting first: by time when the window is a time bound.
    if (cfg.window_wait > 0 && x.submit != y.submit) return x.submit < y.submit;
    if (x.cycles_pending != y.cycles_pending) return x.cycles_pending > y.cycles_pending;
    return x.submit < y.submit;
  });
  std::map<std::string, std::vector<std::size_t>> rest;  // queue -> live, shuffled
  for (std::size_t i : order)
    if (!pinned[i] && !live[i].must) rest[live[i].queue].push_back(i);
  std::map<std::string, std::vector<std::uint32_t>> susp;  // queue -> runs
  for (std::uint32_t ri = 0; ri < cy.runs.size(); ++ri) {
    const Run& r = cy.runs[ri];
    if (r.suspended && !r.gone && !r.protect) susp[queue_name(*r.job, cfg)].push_back(ri);
  }
  for (auto& [qn, v] : susp) {
    if (!by_queue.count(qn)) qnames.push_back(qn);
    // The most expanded first.
    std::sort(v.begin(), v.end(),
              [&](std::uint32_t a, std::uint32_t b) { return more_expanded(*cy.runs[a].rj, *cy.runs[b].rj); });
  }
  std::stable_sort(qnames.begin(), qnames.end(), [&](const std::string& a, const std::string& b) {
    return cy.prio_of(a) > cy.prio_of(b);
  });

  cy.started.assign(live.size(), 0);
  cy.keep_live.assign(live.size(), 0);
  for (std::size_t i = 0; i < live.size(); ++i) cy.keep_live[i] = pinned[i] || live[i].must;
  bool blocked = false;
  auto attempt = [&](std::size_t i) {
    const Job& j = snap.pending[live[i].idx];
    const auto li = static_cast<std::uint32_t>(i);
    const int pr = live[i].prio;
    // A must-start job that cannot start even by suspension is the planner's
    // head: it reserves for it and backfills only what does not delay it.
    // NCI suspends nothing more this cycle (a suspender would take cores
    // the reservation counts on); idle-cpu starts are left to the planner.
    if (cy.try_start(j, li, pr, Cycle::Mode::Priority, live[i].must ? "start window" : "idle cpus", false))
      return true;
    if (blocked) return false;
    if (cfg.priority_run && cy.try_start(j, li, pr, Cycle::Mode::Priority, "priority-run", true))
      return true;
    if (cfg.parallel_run && j.slots_min >= cfg.parallel_min_cpus &&
        cy.try_start(j, li, pr, Cycle::Mode::Parallel, "parallel-run", true))
      return true;
    if (live[i].overdue) {
      cy.unhold_all();
      return cy.try_start(j, li, pr, Cycle::Mode::Overdue, "start window overdue", true);
    }
    if (live[i].must && cy.try_start(j, li, pr, Cycle::Mode::Window, "start window", true)) return true;
    return false;
  };
  // Suspended jobs past their resume window first (the longest suspended
  // first), then the pinned class, then the start-window jobs.
  {
    std::vector<std::uint32_t> late;
    for (std::uint32_t ri = 0; ri < cy.runs.size(); ++ri) {
      const Run& r = cy.runs[ri];
      if (r.rj && r.suspended && !r.gone && !r.protect && long_suspended(*r.rj, snap.now, cfg)) late.push_back(ri);
    }
    sort_claims(snap, cfg, late);  // runs with rj: snap.running's indices
    for (std::uint32_t ri : late) cy.force_resume(ri);
  }
  // With a time window PBA's allocated class may use the free cores
  // suspended jobs hold (the resume window bounds their wait instead);
  // keeping those cores from it cost the projects up to 19,295 s past their
  // threshold on KTH (bench/projects/RESULTS.md).
  if (cfg.window_wait > 0 && !first.empty()) cy.unhold_all();
  for (std::size_t i : first) attempt(i);
  for (std::size_t i : must)
    if (!attempt(i)) blocked = true;
  for (const std::string& qn : qnames) {
    for (std::uint32_t ri : susp[qn]) cy.try_resume(ri);
    for (std::size_t i : rest[qn]) attempt(i);
  }

  // 4. Hand over to the planner, which starts and backfills with the
  // configured policy. Its order: the jobs NCI started by suspending (or by
  // reversing smaller starts) first, as they must start this pass on the
  // cores just freed; then the attempt order (pinned, start window, queues).
  // A blocked start-window job is thus the first the planner cannot start:
  // EASY, conservative and checkpoint reserve for it. Victims count as freed
  // (their memory and jobfs stay held).
  std::vector<std::uint32_t> out;
  out.reserve(live.size());
  // An overdue job took what it needed around the pinned jobs NCI started
  // on idle cpus (PBA's allocated class, perhaps on cores PBA freed for
  // them): those go ahead of it, or the planner may place it on their cores.
  std::vector<std::uint8_t> early(live.size(), 0);
  bool overdue_start = false;
  for (std::size_t i = 0; i < live.size(); ++i) overdue_start |= live[i].overdue && cy.started[i] == 2;
  if (overdue_start)
    for (std::size_t i : first)
      if (cy.started[i] == 1) {
        early[i] = 1;
        out.push_back(live[i].idx);
      }
  const std::size_t nearly = out.size();
  auto emit_if = [&](std::size_t i, bool decided) {
    if (!early[i] && (cy.started[i] == 2) == decided) out.push_back(live[i].idx);
  };
  auto walk = [&](bool decided) {
    for (std::size_t i : first) emit_if(i, decided);
    for (std::size_t i : must) emit_if(i, decided);
    for (const std::string& qn : qnames) {
      auto it = rest.find(qn);
      if (it != rest.end())
        for (std::size_t i : it->second) emit_if(i, decided);
    }
  };
  walk(true);
  const std::size_t decided = out.size() - nearly;
  walk(false);
  st.order = std::move(out);
  st.pinned = decided + first.size();
  st.freed.insert(st.freed.end(), cy.suspended_ids.begin(), cy.suspended_ids.end());
}

void nci_settle(const Snapshot& snap, const NciConfig& cfg, const PassState& st, Plan& plan) {
  (void)cfg;
  // Every job of the NCI order the planner did not start was bypassed this
  // cycle: its window advances ("If a job is bypassed in a cycle, its score
  // will be enhanced in later cycles").
  std::unordered_set<JobId> started;
  for (const Decision& d : plan.decisions)
    if (d.action == Action::Start || d.action == Action::Reject) started.insert(d.job);
  std::unordered_map<JobId, std::size_t> upd;
  for (std::size_t k = 0; k < plan.updates.size(); ++k) upd[plan.updates[k].job] = k;
  for (std::uint32_t idx : st.order) {
    if (idx >= snap.pending.size()) continue;
    const Job& j = snap.pending[idx];
    if (started.count(j.id)) continue;
    auto it = upd.find(j.id);
    if (it != upd.end()) {
      plan.updates[it->second].cycles_pending = j.cycles_pending + 1;
    } else {
      plan.updates.push_back({j.id, j.priority, j.cycles_pending + 1});
      upd[j.id] = plan.updates.size() - 1;
    }
  }
}

bool nci_claims(const Snapshot& snap, const NciConfig& cfg, const PassState& st, const Plan& plan,
                Snapshot& view) {
  // The planner knows queues only from the snapshot: NCI's table when it has none.
  auto with_queues = [&](bool copied) {
    if (!snap.queues.empty()) return copied;
    if (!copied) view = snap;
    view.queues = cfg.queues;
    return true;
  };
  if (!cfg.claim_suspended_cores) return with_queues(false);
  // A start-window job waiting is the planner's head: nothing may delay it,
  // so none are made while one waits (with a time window the resume window
  // bounds the suspension instead), nor when an overdue job starts or waits
  // (it may take held cores).
  bool window_waits = false;
  // Nor with a time window while a job of PBA's allocated class is in the
  // order (it may take held cores: see nci_stage). The pinned head also
  // holds NCI's suspenders: a job with a project stands for PBA's class.
  if (cfg.window_wait > 0)
    for (std::size_t k = 0; k < std::min(st.pinned, st.order.size()); ++k)
      if (st.order[k] < snap.pending.size() && !window_overdue(snap.pending[st.order[k]], snap.now, cfg) &&
          !snap.pending[st.order[k]].project.empty())
        return with_queues(false);
  for (std::size_t k = 0; k < st.order.size(); ++k) {
    if (st.order[k] >= snap.pending.size()) continue;
    const Job& j = snap.pending[st.order[k]];
    if (window_overdue(j, snap.now, cfg)) return with_queues(false);
    if (k >= st.pinned && window_closed(j, snap.now, cfg)) window_waits = true;
  }
  const std::unordered_set<JobId> freed(st.freed.begin(), st.freed.end());
  std::unordered_set<JobId> resumed;
  for (const Decision& d : plan.decisions)
    if (d.action == Action::Resume) resumed.insert(d.job);
  // Who holds each core now: running jobs and jobs resumed this pass (jobs
  // freed this pass hold none: their suspender takes them).
  std::vector<std::vector<std::int32_t>> owner(snap.nodes.size());
  for (std::size_t n = 0; n < snap.nodes.size(); ++n) owner[n].assign(std::max(snap.nodes[n].cores, 0), -1);
  std::vector<std::size_t> susp;
  for (std::size_t i = 0; i < snap.running.size(); ++i) {
    const RunningJob& rj = snap.running[i];
    if (freed.count(rj.job.id)) {
      // Freed for a job of this pass (PBA's preemptor, NCI's suspender): not
      // claimable by a suspended job.
      for (const Placement& p : rj.placement)
        if (p.node < owner.size())
          for (int c : p.cores)
            if (c >= 0 && c < static_cast<int>(owner[p.node].size()) && owner[p.node][c] == -1) owner[p.node][c] = -3;
      continue;
    }
    if (rj.suspended && !resumed.count(rj.job.id)) {
      if (!window_waits) susp.push_back(i);
      continue;
    }
    for (const Placement& p : rj.placement)
      if (p.node < owner.size())
        for (int c : p.cores)
          if (c >= 0 && c < static_cast<int>(owner[p.node].size())) owner[p.node][c] = static_cast<std::int32_t>(i);
  }
  if (susp.empty()) return with_queues(false);
  // The cores the stage kept for each (walk_claims), as a running entry.
  std::vector<RunningJob> claims;
  RunningJob c;
  const Placement* at = nullptr;  // the placement c.placement.back() is from
  Time wait = 0;                  // until the other cores of the job are free (their holders end)
  walk_claims(snap, cfg, std::move(susp), [&](std::size_t, const Placement& p, int k) {
    std::int32_t& o = owner[p.node][k];
    if (o == -1) {
      if (at != &p) {
        at = &p;
        c.placement.emplace_back();
        c.placement.back().node = p.node;
      }
      c.placement.back().cores.push_back(k);
      ++c.placement.back().slots;
      o = -2;  // claimed
    } else if (o >= 0) {
      wait = std::max(wait, snap.running[static_cast<std::size_t>(o)].expected_end - snap.now);
    }
  }, [&](std::size_t i) {
    if (!c.placement.empty()) {
      const RunningJob& rj = snap.running[i];
      c.job = rj.job;
      c.job.mem_mb = c.job.jobfs_mb = 0;  // the suspended entry keeps holding them
      c.job.consumables.clear();
      c.start = rj.start;
      for (const Placement& q : c.placement) c.slots += static_cast<int>(q.slots);
      const Time ran = std::max<Time>(snap.now - rj.start - rj.suspended_for, 0);
      const Time left = std::max<Time>((rj.job.estimate > 0 ? rj.job.estimate : rj.job.walltime) - ran, 1);
      c.expected_end = snap.now + std::max<Time>(wait, 0) + left;
      claims.push_back(std::move(c));
    }
    c = RunningJob{};
    at = nullptr;
    wait = 0;
  });
  if (claims.empty()) return with_queues(false);
  view = snap;
  view.running_version = 0;  // claims added: not what that version promised
  view.running.insert(view.running.end(), std::make_move_iterator(claims.begin()),
                      std::make_move_iterator(claims.end()));
  return with_queues(true);
}

}  // namespace corral
