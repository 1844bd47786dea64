// Project figures (SimOptions::projects): the plan's queues, the ledger's
// charges, weekly reports and the per-project summary.
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

void Simulator::setup_projects() {
  const pba::ProjectPlan& plan = cfg_.pba.plan;
  if (snap_.queues.empty()) snap_.queues = project_queues(plan, cfg_);
  std::string defq = cfg_.nci.default_queue;
  if (!nci_find_queue(snap_.queues, defq) && !snap_.queues.empty()) defq = snap_.queues.front().name;
  const Time origin = n_ ? tr_.jobs[0].submit : 0;
  LedgerConfig lc;
  lc.period_origin = origin;
  lc.week_origin = origin;
  lc.default_queue = defq;
  ledger_.emplace(snap_.queues, lc);
  for (const pba::Grant& g : plan.grants) ledger_->set_grant_every(g.project, g.su, g.period);
  for (std::size_t i = 0; i < plan.projects.size(); ++i)
    proj_index_.emplace(plan.projects[i].name, static_cast<std::int32_t>(i));
  pacc_.assign(plan.projects.size() + 1, {});
  proj_.assign(n_, static_cast<std::int32_t>(plan.projects.size()));
  within_.assign(n_, 0);
  last_t_ = origin;
}

std::map<std::string, double> Simulator::allocations_of(std::int64_t week) const {
  std::map<std::string, double> m;
  for (const auto& p : cfg_.pba.plan.projects)
    m[p.name] = cfg_.pba.plan.allocated_slots(p.name, ledger_->week_start(week));
  return m;
}

void Simulator::report_weeks_until(Time t) {
  if (!opt_.weekly_reports || !ledger_) return;
  while (ledger_->week_start(report_week_ + 1) <= t) {
    Snapshot s = snap_;
    s.now = ledger_->week_start(report_week_ + 1);
    res_.weekly.push_back(build_report(*ledger_, s, report_week_, allocations_of(report_week_)));
    ++report_week_;
  }
}

void Simulator::charge(std::size_t idx, const RunningJob& rj) {
  ProjAcc* a = acc(idx);
  if (!a || !ledger_) return;
  a->used -= rj.slots;
  const Time secs = now_ - recs_[idx].seg_start;
  if (secs <= 0) return;
  try {
    a->su += ledger_->charge(rj.job, secs, now_, rj.slots);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("job " + std::to_string(tr_.jobs[idx].id) + ": " + e.what());
  }
}

void Simulator::arrive_project(std::size_t idx, Job& j) {
  const pba::ProjectPlan& plan = cfg_.pba.plan;
  if (j.project.empty()) j.project = plan.project_of(j.user, j.group);
  auto it = proj_index_.find(j.project);
  if (it == proj_index_.end()) return;  // "(none)"
  proj_[idx] = it->second;
  ProjAcc& a = pacc_[static_cast<std::size_t>(it->second)];
  bool covered = false;
  for (const pba::Allocation* al : plan.allocations_at(now_))
    if (pba::covers(*al, j)) covered = true;
  if (!covered) return;
  const std::int64_t alloc = plan.allocated_slots(j.project, now_);
  if (a.used + a.pend_within + j.slots_min <= alloc) {
    within_[idx] = 1;
    a.pend_within += j.slots_min;
  }
}

void Simulator::summarize_projects(Time first_submit) {
  const pba::ProjectPlan& plan = cfg_.pba.plan;
  const Time t0 = first_submit, t1 = std::max(now_, t0);
  const double span = static_cast<double>(std::max<Time>(1, t1 - t0));
  const Time threshold = cfg_.pba.preempt_after;
  res_.has_projects = true;
  res_.pending_threshold = threshold;
  res_.projects.resize(pacc_.size());
  if (cfg_.nci.enabled && cfg_.nci.window_wait > 0) {
    // The start window's stated bound (nci.hpp): window + quantum.
    res_.start_window = cfg_.nci.window_wait;
    res_.window_bound = window_bound(cfg_.nci);
    for (std::size_t i = 0; i < n_; ++i)  // still suspended at the end
      if (hot_[i].st == St::Suspended) res_.max_suspension = std::max(res_.max_suspension, now_ - recs_[i].suspended_at);
    // Jobs that fit beside every project's allocation at once: PBA may
    // hand the allocated slots back to the projects within its threshold,
    // so only these have room that no allocation can claim.
    int peak_alloc = 0;
    for (Time w = pba::week_start(pba::iso_week(t0)); w < t1; w += pba::kWeek) {
      int sum = 0;
      for (const auto& pd : plan.projects) sum += plan.allocated_slots(pd.name, w);
      peak_alloc = std::max(peak_alloc, sum);
    }
    res_.window_narrow_procs = std::max<std::int64_t>(0, total_ - peak_alloc);
    for (std::size_t i = 0; i < n_; ++i) {
      if (hot_[i].st == St::Rejected) continue;
      const Time w = (recs_[i].first_start >= 0 ? recs_[i].first_start : t1) - tr_.jobs[i].submit;
      if (w > res_.window_bound) ++res_.jobs_past_window;
      res_.max_wait_past_window = std::max(res_.max_wait_past_window, w - res_.window_bound);
      if (tr_.jobs[i].procs <= res_.window_narrow_procs) {
        if (w > res_.window_bound) ++res_.narrow_jobs_past_window;
        res_.max_wait_past_window_narrow = std::max(res_.max_wait_past_window_narrow, w - res_.window_bound);
      }
    }
  }
  std::vector<double> wsum(pacc_.size(), 0);
  std::vector<std::size_t> waited(pacc_.size(), 0);
  for (std::size_t i = 0; i < n_; ++i) {
    const std::size_t p = static_cast<std::size_t>(proj_[i]);
    ProjectResult& o = res_.projects[p];
    const Rec& r = recs_[i];
    const Hot& h = hot_[i];
    if (h.st == St::Rejected) continue;
    ++o.jobs;
    const Time w = (r.first_start >= 0 ? r.first_start : t1) - tr_.jobs[i].submit;
    wsum[p] += static_cast<double>(w);
    ++waited[p];
    o.max_wait = std::max(o.max_wait, w);
    if (within_[i]) {
      ++o.allocated_jobs;
      o.max_wait_past_threshold = std::max(o.max_wait_past_threshold, w - threshold);
    }
  }
  for (std::size_t p = 0; p < pacc_.size(); ++p) {
    ProjectResult& o = res_.projects[p];
    o.name = p < plan.projects.size() ? plan.projects[p].name : "(none)";
    o.mean_wait = waited[p] ? wsum[p] / static_cast<double>(waited[p]) : 0;
    o.mean_slots_used = pacc_[p].used_int / span;
    o.su_charged = pacc_[p].su;
    o.preemptions_suffered = pacc_[p].suffered;
    o.preemptions_caused = pacc_[p].caused;
    if (p < plan.projects.size()) {
      if (ledger_ && ledger_->has_grant(o.name, t1)) {
        o.has_grant = true;
        o.grant_left = ledger_->grant_left(o.name, t1);
      }
      // The weekly allocations over [t0, t1), weighted by their overlap.
      double area = 0;
      for (Time w = pba::week_start(pba::iso_week(t0)); w < t1; w += pba::kWeek) {
        const Time a = std::max(w, t0), b = std::min(w + pba::kWeek, t1);
        const int slots = plan.allocated_slots(o.name, w);
        o.allocated_peak = std::max<Time>(o.allocated_peak, slots);
        if (b > a) area += static_cast<double>(slots) * static_cast<double>(b - a);
      }
      o.allocated_slots = area / span;
    }
  }
}

}  // namespace corral::sim::detail

namespace corral::sim {

std::vector<Queue> project_queues(const pba::ProjectPlan& plan, const SchedConfig& cfg) {
  std::vector<Queue> qs = plan.queues;
  if (qs.empty()) {
    // nci-pbs-policy.txt "Queue structure": express 3, normal 1, bonus 0 SU;
    // its bounds are site defaults, lifted for SWF jobs (any size/runtime).
    qs = nci_default_queues();
    for (Queue& q : qs) {
      q.max_walltime = 0;
      q.max_cpus = 0;
      q.max_mem_mb = 0;
      q.max_jobfs_mb = 0;
    }
  }
  // Free queues below every other one, unless the plan declares them: NCI
  // demotes a project with no grant left to its bonus queue; PBA's
  // pre-qualification demotes to its lowest queue (idle slots only).
  if (cfg.nci.enabled) add_lowest_queue(qs, cfg.nci.bonus_queue);
  if (cfg.pba.enabled) add_lowest_queue(qs, cfg.pba.lowest_queue);
  return qs;
}

void use_projects(SimOptions& opt, const pba::ProjectPlan& plan, bool nci) {
  opt.projects = true;
  SchedConfig& c = opt.sched;
  c.pba.enabled = true;
  c.pba.plan = plan;
  c.pba.require_project_tag = false;  // trace jobs of no project stay normal jobs
  if (nci) {
    c.nci.enabled = true;
    c.nci.require_vmem = c.nci.require_jobfs = false;  // SWF carries no memory
    c.pba.resume_suspended = false;                     // NCI resumes itself
    c.pba.suspended_hold_cores = c.nci.claim_suspended_cores;  // and holds their cores
  }
  c.nci.queues = project_queues(plan, c);
  if (!nci_find_queue(c.nci.queues, c.nci.default_queue)) c.nci.default_queue = c.nci.queues.front().name;
}

}  // namespace corral::sim
