// Small builders for NCI tests.
#pragma once
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/nci/nci.hpp"
#include "coordinator/planner/planner.hpp"

namespace nci_test {
using namespace corral;

inline Node node(const std::string& name, int cores, std::int64_t mem = 0, std::int64_t jobfs = 0) {
  Node n;
  n.name = name;
  n.cores = cores;
  n.mem_mb = mem;
  n.jobfs_mb = jobfs;
  return n;
}

inline Job job(JobId id, int cpus, Time wall, const std::string& queue = "normal",
               const std::string& user = "u", const std::string& project = "p",
               std::int64_t mem = 100, std::int64_t jobfs = 10) {
  Job j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.user = user;
  j.project = project;
  j.queue = queue;
  j.walltime = wall;
  j.slots_min = j.slots_max = cpus;
  j.mem_mb = mem;
  j.jobfs_mb = jobfs;
  return j;
}

// A running job on node `n`, cores [first, first+cpus).
inline RunningJob running(const Job& j, std::uint32_t n, int first, Time start) {
  RunningJob r;
  r.job = j;
  r.start = start;
  r.expected_end = start + j.walltime;
  r.slots = j.slots_min;
  Placement p;
  p.node = n;
  p.slots = static_cast<std::uint32_t>(j.slots_min);
  for (int c = 0; c < j.slots_min; ++c) p.cores.push_back(first + c);
  r.placement.push_back(p);
  return r;
}

inline PassState fifo(const Snapshot& s) {
  PassState st;
  st.order.resize(s.pending.size());
  std::iota(st.order.begin(), st.order.end(), 0u);
  return st;
}

// The rest of the pass after nci_stage, as schedule() runs it: the planner
// (EASY, no duration offset) starts what NCI ordered, on the cores NCI freed
// and not on cores suspended jobs hold; then bypassed jobs age.
inline void plan_rest(const Snapshot& s, const NciConfig& cfg, const PassState& st, Plan& plan,
                      Backfill bf = Backfill::Easy) {
  PlannerConfig pc;
  pc.backfill = bf;
  pc.duration_offset = 0;
  Snapshot view;
  const bool claimed = nci_claims(s, cfg, st, plan, view);
  plan_pass(claimed ? view : s, pc, st, plan);
  nci_settle(s, cfg, st, plan);
}

// One NCI pass: nci_stage then the planner. `out`: the PassState NCI handed
// over; `pinned`: the first jobs of the order an earlier stage (PBA's
// allocated class) pinned ahead.
inline Plan run_stage(const Snapshot& s, const NciConfig& cfg, PassState* out = nullptr,
                      std::size_t pinned = 0, std::uint64_t seed = 1) {
  PassState st = fifo(s);
  st.pinned = pinned;
  Plan plan;
  plan.now = s.now;
  nci_stage(s, cfg, seed, st, plan);
  if (out) *out = st;
  plan_rest(s, cfg, st, plan);
  return plan;
}

// What over-commits `nodes` at time t with the running and suspended jobs of
// `live` (anything with an `rj` RunningJob), "" if nothing: a core given
// twice, a placement without its cores, more slots than cores, or, where a
// node tracks memory, more memory than it has (a suspended job keeps its
// memory, not its cores).
template <class Lives>
std::string overcommit(const std::vector<Node>& nodes, const Lives& live, Time t) {
  const std::string at = " at t=" + std::to_string(t);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    std::set<int> used;
    int slots = 0;
    std::int64_t mem = 0;
    for (const auto& l : live)
      for (const Placement& p : l.rj.placement) {
        if (p.node != n) continue;
        mem += (l.rj.job.mem_mb * p.slots + l.rj.slots - 1) / l.rj.slots;
        if (l.rj.suspended) continue;
        if (p.cores.size() != p.slots) return "placement without cores" + at;
        slots += static_cast<int>(p.slots);
        for (int c : p.cores)
          if (!used.insert(c).second) return "core " + std::to_string(c) + " of node " + std::to_string(n) + " given twice" + at;
      }
    if (slots > nodes[n].cores) return "cores overcommitted" + at;
    if (nodes[n].mem_mb > 0 && mem > nodes[n].mem_mb) return "memory overcommitted" + at;
  }
  return "";
}

inline std::vector<JobId> ids(const Plan& p, Action a) {
  std::vector<JobId> v;
  for (const Decision& d : p.decisions)
    if (d.action == a) v.push_back(d.job);
  return v;
}

inline const Decision* find(const Plan& p, Action a, JobId id) {
  for (const Decision& d : p.decisions)
    if (d.action == a && d.job == id) return &d;
  return nullptr;
}

inline NciConfig cfg_on() {
  NciConfig c;
  c.enabled = true;
  return c;
}
}  // namespace nci_test
