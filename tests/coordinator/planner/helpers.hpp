// Small builders for hand-made snapshots in the planner tests.
#pragma once
#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/planner/planner.hpp"

namespace corral::testing {

inline Snapshot cluster(int nodes, int cores = 1, Time now = 0) {
  Snapshot s;
  s.now = now;
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.cores = cores;
    s.nodes.push_back(n);
  }
  return s;
}

inline Job job(JobId id, int slots, Time est, Time submit = 0) {
  Job j;
  j.id = id;
  j.slots_min = j.slots_max = slots;
  j.walltime = est;
  j.submit = submit;
  return j;
}

// A running job on single-core nodes first..first+slots-1 (or one node with `slots` cores).
inline RunningJob running(JobId id, int slots, Time start, Time end, std::uint32_t node, bool spread = true) {
  RunningJob r;
  r.job = job(id, slots, end - start);
  r.start = start;
  r.expected_end = end;
  r.slots = slots;
  if (spread) {
    for (int i = 0; i < slots; ++i) r.placement.push_back({node + static_cast<std::uint32_t>(i), 1, {0}});
  } else {
    Placement p{node, static_cast<std::uint32_t>(slots), {}};
    for (int c = 0; c < slots; ++c) p.cores.push_back(c);
    r.placement.push_back(p);
  }
  return r;
}

inline PassState fifo(const Snapshot& s) {
  PassState st;
  for (std::uint32_t i = 0; i < s.pending.size(); ++i) st.order.push_back(i);
  return st;
}

inline Plan run(const Snapshot& s, PlannerConfig cfg) {
  Plan p;
  plan_pass(s, cfg, fifo(s), p);
  return p;
}

inline PlannerConfig cfg_of(Backfill b) {
  PlannerConfig c;
  c.backfill = b;
  c.duration_offset = 0;
  return c;
}

inline const Decision* find(const Plan& p, JobId id, Action a) {
  for (const Decision& d : p.decisions)
    if (d.job == id && d.action == a) return &d;
  return nullptr;
}

inline std::vector<JobId> started(const Plan& p) {
  std::vector<JobId> v;
  for (const Decision& d : p.decisions)
    if (d.action == Action::Start) v.push_back(d.job);
  return v;
}

}  // namespace corral::testing
