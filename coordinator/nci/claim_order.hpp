// The order in which suspended jobs claim their free cores and are resumed
// (private to coordinator/nci): shared by the cycle (nci_stage) and the
// claims the planner is shown (nci_claims).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "coordinator/nci/nci.hpp"
#include "coordinator/nci/queue_lookup.hpp"

namespace corral::nci_detail {

// Suspended for resume_window or longer: force_resume() in the next cycle.
inline bool long_suspended(const RunningJob& rj, Time now, const NciConfig& cfg) {
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
inline bool fifo_claims(const NciConfig& cfg) { return cfg.window_wait > 0; }

// The most expanded (XFactor so far) first, then by id: the claim order
// without a time window, and the resume order within a queue.
inline bool more_expanded(const RunningJob& x, const RunningJob& y) {
  const double xa = expansion_factor(x, 0), xb = expansion_factor(y, 0);
  if (xa != xb) return xa > xb;
  return x.job.id < y.job.id;
}

inline bool claims_before(const RunningJob& x, int px, const RunningJob& y, int py, Time now, const NciConfig& cfg) {
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

}  // namespace corral::nci_detail
