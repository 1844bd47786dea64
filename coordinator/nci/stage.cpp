// One NCI scheduling cycle as a stage of the pass (nci_stage) and the window
// bookkeeping after the planner ran (nci_settle).
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "coordinator/nci/claim_order.hpp"
#include "coordinator/nci/cycle.hpp"

namespace corral {

using namespace nci_detail;

namespace {

// A pending job the cycle considers: its entry, queue, runpriority, and
// whether its start window closed (must) or is overdue.
struct Live {
  std::uint32_t idx;
  std::string queue;
  int prio;
  bool must;
  bool overdue;
};

// One NCI cycle as a stage: what its steps (in nci_stage's order) share.
struct Stage {
  Stage(const Snapshot& s, const NciConfig& c, PassState& p, Plan& pl)
      : snap(s), cfg(c), st(p), plan(pl), cy(s, c, pl) {}

  const Snapshot& snap;
  const NciConfig& cfg;
  PassState& st;
  Plan& plan;
  Cycle cy;
  std::vector<Live> live;
  std::map<std::string, std::vector<std::size_t>> by_queue;  // into live
  std::vector<std::size_t> order;                            // into live, shuffled
  std::vector<std::string> qnames;                           // queues, priority order
  std::vector<std::uint8_t> pinned;                          // per live entry
  std::vector<std::size_t> first;                            // pinned, in the order handed in
  std::vector<std::size_t> must;                             // start-window jobs, in attempt order
  std::map<std::string, std::vector<std::size_t>> rest;      // queue -> live, shuffled
  std::map<std::string, std::vector<std::uint32_t>> susp;    // queue -> suspended runs
  bool blocked = false;

  void screen();
  void shuffle();
  void arrange();
  bool attempt(std::size_t i);
  void attempt_all();
  void hand_over();
};

// 1. Mandatory requests and bounds; projects without grant go to bonus.
void Stage::screen() {
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
    const bool must_start = window_closed(j, snap.now, cfg);
    live.push_back({idx, q, cy.prio_of(q), must_start, must_start && window_overdue(j, snap.now, cfg)});
  }
}

// 2. Equal-access shuffle of each queue, queues in priority order.
void Stage::shuffle() {
  for (std::size_t i = 0; i < live.size(); ++i) by_queue[live[i].queue].push_back(i);
  std::map<std::string, std::vector<const RunningJob*>> running_by_queue;
  for (const RunningJob& rj : snap.running) running_by_queue[queue_name(rj.job, cfg)].push_back(&rj);
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
}

// 3. Attempt order ("Job selection"): jobs an earlier stage pinned first
// (PBA's allocated class, st.pinned) in their order; then start-window
// jobs (longest waiting first); then, for each queue in priority order,
// resume its suspended jobs (their suspender may have completed) and try
// its queued jobs in shuffled order.
void Stage::arrange() {
  const std::size_t npin = std::min(st.pinned, st.order.size());
  pinned.assign(live.size(), 0);
  {
    std::unordered_set<std::uint32_t> pin(st.order.begin(), st.order.begin() + static_cast<std::ptrdiff_t>(npin));
    for (std::size_t i = 0; i < live.size(); ++i) pinned[i] = pin.count(live[i].idx) > 0;
  }
  for (std::size_t i = 0; i < live.size(); ++i)
    if (pinned[i]) first.push_back(i);
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
  for (std::size_t i : order)
    if (!pinned[i] && !live[i].must) rest[live[i].queue].push_back(i);
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
}

// Tries to start live entry i: on idle cpus, else by suspending victims.
bool Stage::attempt(std::size_t i) {
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
}

// Suspended jobs past their resume window first (the longest suspended
// first), then the pinned class, then the start-window jobs, then each queue.
void Stage::attempt_all() {
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
}

// 4. Hand over to the planner, which starts and backfills with the
// configured policy. Its order: the jobs NCI started by suspending (or by
// reversing smaller starts) first, as they must start this pass on the
// cores just freed; then the attempt order (pinned, start window, queues).
// A blocked start-window job is thus the first the planner cannot start:
// EASY, conservative and checkpoint reserve for it. Victims count as freed
// (their memory and jobfs stay held).
void Stage::hand_over() {
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

}  // namespace

void nci_stage(const Snapshot& snap, const NciConfig& cfg, std::uint64_t seed, PassState& st,
               Plan& plan) {
  (void)seed;  // ties keep the FIFO order handed in, which is already repeatable
  Stage s(snap, cfg, st, plan);
  s.cy.build();
  s.cy.add_running(st);
  s.screen();
  s.shuffle();
  s.arrange();
  s.attempt_all();
  s.hand_over();
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

}  // namespace corral
