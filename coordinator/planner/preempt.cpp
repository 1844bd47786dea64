#include "coordinator/planner/preempt.hpp"

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace corral {

namespace {

Time total_estimate(const Job& j) {
  const Time e = j.estimate > 0 ? j.estimate : j.walltime;
  return std::max<Time>(1, e);
}

// Bounded like the slowdown it stands for (threshold 10 s): a 1-s job is
// not worth 10 times a 10-s job.
double bounded(Time t) { return static_cast<double>(std::max<Time>(10, t)); }

// When the planner expects a running job's cores back (planner.cpp: a
// backfilled job under the checkpoint policy ends at its shortened window).
Time planned_end(const RunningJob& rj, const PlannerConfig& pcfg) {
  if (pcfg.backfill == Backfill::Checkpoint && rj.backfilled)
    return std::min(rj.expected_end, std::max(rj.start + 1, backfill_window_end(rj, pcfg)));
  return rj.expected_end;
}

struct Cand {
  std::size_t ri;
  int slots;
  double xf;
};

}  // namespace

double expansion_pending(const Job& j, Time now) {
  const Time total = total_estimate(j);
  const Time left = std::max<Time>(1, total - j.work_done);
  const Time wait = std::max<Time>(0, now - j.submit - j.work_done);
  return (static_cast<double>(wait) + bounded(left)) / bounded(total);
}

double expansion_running(const RunningJob& rj) {
  const Time total = total_estimate(rj.job);
  const Time left = std::max<Time>(1, total - rj.job.work_done);
  const Time wait = std::max<Time>(0, rj.start - rj.job.submit - rj.job.work_done);
  return (static_cast<double>(wait) + bounded(left)) / bounded(total);
}

bool preempt_stage(const Snapshot& snap, const PreemptConfig& cfg, const OrderConfig& ocfg, const PlannerConfig& pcfg,
                   PassState& st, Plan& plan, Snapshot& out) {
  if (!cfg.enabled || snap.pending.empty() || snap.running.empty() || cfg.max_preemptors <= 0) return false;
  const Time now = snap.now;
  const Time cost = std::max<Time>(0, pcfg.checkpoint_cost);
  std::unordered_set<JobId> freed(st.freed.begin(), st.freed.end());
  const std::int64_t cores = up_cores(snap);

  // Cores free now, or by the time a checkpoint would be written: a job that
  // can start that soon anyway is not worth a preemption.
  std::int64_t avail = 0;
  for (const Node& nd : snap.nodes)
    if (nd.up) avail += nd.cores;
  std::vector<Time> end_of(snap.running.size(), 0);
  for (std::size_t ri = 0; ri < snap.running.size(); ++ri) {
    const RunningJob& rj = snap.running[ri];
    if (rj.suspended || freed.count(rj.job.id)) continue;
    end_of[ri] = planned_end(rj, pcfg);
    if (end_of[ri] > now + cost) avail -= rj.slots;
  }
  avail = std::max<std::int64_t>(0, avail);

  std::vector<std::uint8_t> taken(snap.running.size(), 0);
  std::vector<std::size_t> victims;
  std::vector<Cand> cands;
  int preemptors = 0;
  for (std::uint32_t idx : st.order) {
    if (preemptors >= cfg.max_preemptors) break;
    if (idx >= snap.pending.size()) continue;
    const Job& p = snap.pending[idx];
    if (p.slots_min <= avail) {  // starts now or soon without help
      avail -= p.slots_min;
      continue;
    }
    ++preemptors;  // the head and the next blocked jobs are examined
    const Time waited = now - p.submit - p.work_done;
    if (waited < cfg.min_wait) continue;
    const Time aging = aging_of(p, ocfg, cores);
    const bool aged = aging > 0 && now - p.submit >= aging;
    if (aged && !cfg.aged_preempt) continue;
    const double xp = expansion_pending(p, now);
    const Time p_end = now + cost + planned_duration(p, pcfg);
    cands.clear();
    std::int64_t cand_slots = 0;
    for (std::size_t ri = 0; ri < snap.running.size(); ++ri) {
      const RunningJob& rj = snap.running[ri];
      if (taken[ri] || rj.suspended || !rj.job.checkpointable || freed.count(rj.job.id)) continue;
      if (rj.job.requeues >= cfg.max_requeues) continue;  // no endless thrashing
      if (!pcfg.checkpoint_fresh && rj.job.requeues == 0) continue;  // the budget is spent
      if (end_of[ri] <= now + cost) continue;  // already counted as coming free
      // A job that started as an aged job is the wait bound's: never a victim
      // (aged jobs must not preempt one another in turn).
      const Time va = aging_of(rj.job, ocfg, cores);
      if (va > 0 && rj.start - rj.job.submit >= va) continue;
      const double xv = expansion_running(rj);
      if (!aged) {
        if (end_of[ri] - now < cfg.min_left || end_of[ri] < p_end) continue;
        if (!(xp > cfg.factor * xv)) continue;
      }
      cands.push_back({ri, rj.slots, xv});
      cand_slots += rj.slots;
    }
    const std::int64_t need = p.slots_min - avail;
    if (cand_slots < need) continue;
    // Fewest cores lost: the smallest single job that is enough, else the
    // largest first (fewest checkpoints, as checkpoint-backfill-patent step 4).
    std::size_t first_victim = victims.size();
    const Cand* single = nullptr;
    for (const Cand& c : cands)
      if (c.slots >= need && (!single || c.slots < single->slots || (c.slots == single->slots && c.xf < single->xf)))
        single = &c;
    std::int64_t got = 0;
    if (single) {
      victims.push_back(single->ri);
      got = single->slots;
    } else {
      std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        return a.slots != b.slots ? a.slots > b.slots : a.xf < b.xf;
      });
      for (const Cand& c : cands) {
        if (got >= need) break;
        victims.push_back(c.ri);
        got += c.slots;
      }
    }
    for (std::size_t k = first_victim; k < victims.size(); ++k) {
      taken[victims[k]] = 1;
      Decision d;
      d.action = Action::Checkpoint;
      d.job = snap.running[victims[k]].job.id;
      d.at = now;
      d.reason = std::string(aged ? "aged " : "") + "job " + std::to_string(p.id) +
                 " preempts (selective preemption, expansion factor)";
      plan.decisions.push_back(std::move(d));
    }
    // The preemptor uses every core free now plus the victims'; what the
    // victims hold beyond its need comes back with them.
    avail = got - need;
  }
  if (victims.empty()) return false;
  if (cost == 0) {  // the cores are free at once
    for (std::size_t ri : victims) st.freed.push_back(snap.running[ri].job.id);
    return false;
  }
  out = snap;
  for (std::size_t ri : victims) {
    RunningJob& rj = out.running[ri];
    rj.expected_end = now + cost;
    rj.backfilled = false;
  }
  return true;
}

}  // namespace corral
