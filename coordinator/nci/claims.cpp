// The free cores suspended jobs hold until they resume, shown to the
// planner as running entries (nci_claims).
#include <algorithm>
#include <iterator>
#include <unordered_set>

#include "coordinator/nci/claim_order.hpp"

namespace corral {

using namespace nci_detail;

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
