// The scheduling cycle, and the boundary a mesh plugs into:
//   snapshot()  state out: this node and its pending and running jobs as the
//               scheduling core sees them (coordinator/model.hpp);
//   apply()     decisions in: a Plan from schedule(), today the local core's,
//               in a mesh the elected coordinator's.
// cycle() is standalone mode: schedule(snapshot()) then apply(). The policy
// configuration (backfill, NCI, PBA's project plan, the monitor file) is set
// up here too.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"

namespace corral::agent {

namespace {
// The charge of a queue configured without one: the policy's for its name
// (nci-pbs-policy.txt "Queue structure": express 3, normal 1, bonus 0), else 1.
double seed_charge(const std::string& name) {
  for (const Queue& q : nci_default_queues())
    if (q.name == name) return q.charge_factor;
  return 1.0;
}
// The core's view of a job record. What can change while a job waits (policy state from
// Plan::updates, a Demote's queue) is set by refresh() too; the names, project, pe and sizes are
// fixed at submit.
void refresh(Job& j, const JobRecord& r) {
  if (j.queue != r.spec.queue) j.queue = r.spec.queue;
  j.priority = r.priority;
  j.cycles_pending = r.cycles_pending;
  j.requeues = r.requeues;
  j.pba_preemptions = r.pba_preemptions;
  j.last_start_priority = r.last_start_priority;
  j.work_done = r.work_done;
  j.first_start = static_cast<Time>(r.first_start);
}
Job to_job(const JobRecord& r, PreemptMode mode) {
  Job j;
  set_request(j, r.spec, mode);  // mode: the node's preempt_mode, unless the job chose
  j.id = r.id;
  j.user = r.user;
  j.group = r.group;
  j.submit = static_cast<Time>(r.submit_time);
  refresh(j, r);
  return j;
}
}  // namespace

// ---------------------------------------------------------------- setup --

void Daemon::setup_scheduling() {
  apply_policy(cfg_.policy, sched_);
  if (cfg_.order) sched_.order.policy = *cfg_.order;
  sched_.planner.max_reservation = cfg_.max_reservation;
  sched_.planner.duration_offset = static_cast<Time>(cfg_.duration_offset);
  if (cfg_.split_factor) sched_.planner.checkpoint_split = *cfg_.split_factor;
  sched_.planner.checkpoint_threshold = static_cast<Time>(cfg_.split_threshold);
  // A checkpointed job holds its cores until it leaves, at most checkpoint_grace: the reserved
  // job is planned for then, not started into cores still held.
  sched_.planner.checkpoint_cost = cfg_.checkpoint_grace;
  if (cfg_.default_duration > 0) sched_.planner.default_duration = cfg_.default_duration;
  if (!cfg_.monitor_file.empty()) {
    open_monitor();  // a path it cannot write is a clear error at start
    sched_.planner.monitor = true;
  }
  sched_.nci.enabled = cfg_.nci;
  if (cfg_.nci) {
    auto req = [&](const char* k) {
      return std::find(cfg_.nci_require.begin(), cfg_.nci_require.end(), k) != cfg_.nci_require.end();
    };
    sched_.nci.require_walltime = req("walltime");
    sched_.nci.require_vmem = req("mem");
    sched_.nci.require_jobfs = req("jobfs");
    sched_.nci.window_wait = static_cast<Time>(cfg_.nci_start_window);
  }
  preempt_mode_ = cfg_.preempt_mode;
}

// The origin of a PBA plan's relative dates (+N weeks, +DURATION deadlines):
// the first start with PBA, kept in state_dir/pba_origin, so that a restart
// moves no allocation and no deadline.
Time Daemon::pba_origin() {
  const std::string path = cfg_.state_dir + "/pba_origin";
  {
    std::ifstream in(path);
    long long t = 0;
    if (in >> t && t > 0) return static_cast<Time>(t);
  }
  const Time t = static_cast<Time>(now());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << t << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp + ": " + errno_text());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path + ": " + errno_text());
  return t;
}

pba::ProjectPlan read_plan(const std::string& key, const std::string& path, Time origin) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(key + " " + path + ": cannot read: " + errno_text());
  std::ostringstream text;
  text << f.rdbuf();
  pba::PlanParseOptions po;
  po.origin = origin;
  pba::PlanParseResult pr = pba::parse_plan(text.str(), po);
  if (!pr.ok()) {
    std::string all;
    for (const auto& e : pr.errors) all += (all.empty() ? "" : "; ") + e;
    throw std::runtime_error(key + " " + path + ": " + all);
  }
  if (pr.plan.projects.empty()) throw std::runtime_error(key + " " + path + ": no project declared");
  return std::move(pr.plan);
}

// pba = yes: the plan file (docs/plan-file.md) read as `corral sim --projects` reads
// it (sim::use_projects), with relative dates counted from pba_origin().
void Daemon::setup_pba() {
  const std::string& path = cfg_.pba_plan;
  if (path.empty())
    throw std::runtime_error("pba = yes needs pba_plan = FILE (a project plan: docs/plan-file.md)");
  pba::PlanParseOptions po;
  po.origin = pba_origin();
  pba::ProjectPlan plan = read_plan("pba_plan", path, po.origin);
  if (!plan.queues.empty())
    log_line("pba_plan " + path + ": its queue lines are not used here (queues come from `queues`)");
  PbaConfig& p = sched_.pba;
  p.enabled = true;
  p.plan = std::move(plan);
  p.preempt = cfg_.pba_preempt;
  p.preempt_after = static_cast<Time>(cfg_.pba_preempt_after);
  p.max_requeues = static_cast<int>(cfg_.pba_max_requeues);
  p.require_project_tag = cfg_.pba_require_project;
  if (cfg_.nci) {  // as sim::use_projects: NCI resumes, and holds suspended jobs' cores
    p.resume_suspended = false;
    p.suspended_hold_cores = sched_.nci.claim_suspended_cores;
    // With a time window NCI lets PBA's allocated class use the cores
    // suspended jobs hold (nci_claims), so PBA counts them free (as corral sim).
    if (cfg_.nci_start_window > 0) p.suspended_hold_cores = false;
  }
  sched_.planner.may_place = pba::may_place_now;  // placeholder slots beside memory-heavy jobs
  load_allocations();
  int allocated = 0;
  for (const auto& pd : p.plan.projects) allocated += p.plan.allocated_slots(pd.name, po.origin);
  log_line("PBA: plan " + path + ": " + std::to_string(p.plan.projects.size()) + " project(s), " +
           std::to_string(allocated) + " slot(s) allocated this week; preemption " +
           (p.preempt ? "after " + std::to_string(p.preempt_after) + " s pending, by " + std::string(name(cfg_.preempt_mode))
                      : std::string("off")));
}

// MONITOR (sge6-reservation-backfill.txt 2d): the schedule file, appended to
// and never truncated, as Grid Engine's; SIGHUP reopens it (rotation).
void Daemon::open_monitor() {
  std::FILE* f = std::fopen(cfg_.monitor_file.c_str(), "a");
  if (!f) throw std::runtime_error("monitor_file: cannot open " + cfg_.monitor_file + ": " + errno_text());
  monitor_.reset(f);
}

void Daemon::write_monitor(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    std::fwrite(l.data(), 1, l.size(), monitor_.get());
    std::fputc('\n', monitor_.get());
  }
  if (std::fflush(monitor_.get()) != 0) log_line("monitor_file " + cfg_.monitor_file + ": write failed: " + errno_text());
}

// ----------------------------------------------------- state out: snapshot --

std::vector<Queue> Daemon::snapshot_queues() const {
  std::vector<Queue> out;
  for (const auto& q : cfg_.queues) {
    Queue qq;
    qq.name = q.name;
    qq.priority = q.priority;
    qq.charge_factor = q.charge >= 0 ? q.charge : seed_charge(q.name);
    out.push_back(std::move(qq));
  }
  // NCI moves a project with no grant left to its bonus queue (free, below every other queue),
  // as corral sim does (coordinator/sim/projects.cpp project_queues()).
  if (sched_.nci.enabled) add_lowest_queue(out, sched_.nci.bonus_queue);
  // PBA's pre-qualification demotes to this queue: below every other one, unless configured
  // (as for corral sim, coordinator/sim/projects.cpp project_queues()).
  if (sched_.pba.enabled) add_lowest_queue(out, sched_.pba.lowest_queue);
  return out;
}

void Daemon::snapshot_fixed(Snapshot& s, Time t) const {
  s.now = t;
  const node::Topology& topo = launcher_->topology();
  Node n;
  n.name = hostname_;
  n.cores = static_cast<int>(topo.cores.size());
  n.mem_mb = topo.mem_mb;
  n.jobfs_mb = topo.jobfs_mb;
  for (const auto& c : topo.cores) n.core_numa.push_back(c.numa);
  s.nodes.clear();
  s.nodes.push_back(std::move(n));
  s.queues = snapshot_queues();
  s.running.clear();
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    RunningJob rj;
    rj.job = to_job(r, preempt_mode_);
    rj.start = static_cast<Time>(r.start_time);
    // No walltime: planned for default_duration as it was before its start
    // (Grid Engine), else as if it ran for a year (it holds its cores).
    // Suspended time does not count against the walltime (nci-pbs-policy.txt).
    rj.suspended_for = static_cast<Time>(suspended_total(r, t));
    const Time no_walltime = cfg_.default_duration > 0 ? static_cast<Time>(cfg_.default_duration) : 365 * 86400;
    // DURATION_OFFSET as for a pending job: its planned end does not move earlier at its start.
    rj.expected_end = rj.start + rj.suspended_for + (r.spec.walltime > 0 ? r.spec.walltime : no_walltime) +
                      sched_.planner.duration_offset;
    rj.slots = granted(r);
    rj.job.mem_mb = proto::mem_for_slots(r.spec, rj.slots);  // h_vmem: per slot of the slots it got
    rj.placement.push_back(Placement{0, static_cast<std::uint32_t>(rj.slots), r.cores});
    rj.suspended = r.state == proto::state::kSuspended;
    // Backfilled (checkpoint policy), unless its checkpoint is being taken already.
    rj.backfilled = r.backfilled && !r.requeue_requested;
    rj.backfill_estimate = static_cast<Time>(r.backfill_estimate);
    // The NCI resume window counts from the start of this suspension; a job an
    // admin holds (`corral suspend`) has none: only `corral resume` thaws it.
    if (rj.suspended && !r.held && r.suspended_since > 0) rj.suspended_since = static_cast<Time>(r.suspended_since);
    s.running.push_back(std::move(rj));
  }
}

Snapshot Daemon::snapshot(Time t) const {
  Snapshot s;
  snapshot_fixed(s, t);
  s.pending.reserve(pending_.size());
  for (auto id : pending_) {
    auto it = store_->jobs().find(id);
    if (it == store_->jobs().end()) throw std::out_of_range("snapshot: pending job " + std::to_string(id) + " is not in the store");
    s.pending.push_back(to_job(it->second, preempt_mode_));
  }
  return s;
}

// snapshot(t), kept in snap_ and brought up to date: both pending_ and snap_.pending are in id
// order, so one merge walk drops the jobs that left, converts the ones that came (appended, or
// a requeued job put back in its place) and refreshes the rest in place.
const Snapshot& Daemon::pass_snapshot(Time t) {
  snapshot_fixed(snap_, t);
  auto& v = snap_.pending;
  // Only the kept entries whose record changed since the last pass are refreshed: a walk of every
  // pending record costs a cache miss each.
  auto& stale = snap_stale_;
  std::sort(stale.begin(), stale.end());
  std::size_t st = 0;
  std::size_t w = 0, r = 0;  // write and read positions: [w, r) are dropped entries
  for (auto id : pending_) {
    while (r < v.size() && v[r].id < id) ++r;
    if (r < v.size() && v[r].id == id) {
      if (w != r) {
        v[w] = std::move(v[r]);
        snap_recs_[w] = snap_recs_[r];
      }
      while (st < stale.size() && stale[st] < id) ++st;
      if (st < stale.size() && stale[st] == id) refresh(v[w], *snap_recs_[w]);
      ++w, ++r;
      continue;
    }
    const JobRecord* rec = store_->find(id);
    if (!rec) throw std::out_of_range("snapshot: pending job " + std::to_string(id) + " is not in the store");
    if (w < r) {  // reuse a dropped entry's place
      v[w] = to_job(*rec, preempt_mode_);
      snap_recs_[w] = rec;
    } else {
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(w), to_job(*rec, preempt_mode_));
      snap_recs_.insert(snap_recs_.begin() + static_cast<std::ptrdiff_t>(w), rec);
      ++r;
    }
    ++w;
  }
  v.erase(v.begin() + static_cast<std::ptrdiff_t>(w), v.end());
  snap_recs_.resize(w);
  stale.clear();
  if (trace_on() && std::getenv("CORRAL_CHECK_SNAPSHOT")) {
    // Self-check (tests): the kept snapshot says what a fresh one says.
    const bool same = snapshot(t).pending == v;  // every member of every job
    log_line(same ? "trace: snapshot check ok (" + std::to_string(v.size()) + " pending)"
                  : "trace: snapshot check FAILED");
  }
  return snap_;
}

// The kept pass snapshot's memory back (the queue drained); the next pass builds it anew.
void Daemon::drop_pass_snapshot() {
  snap_ = Snapshot{};
  snap_recs_ = {};
  snap_stale_ = {};
}

// ----------------------------------------------------------- the cycle --

void Daemon::cycle() {
  dirty_ = false;
  if (mesh_) return;  // in a mesh the coordinator decides (coordinator/service/coordinator_loop.hpp)
  feed_arrays();
  resolve_dependencies();
  if (pending_.empty() && active_.empty()) return;
  double t0 = mono_now();
  // A kept Planner and Plan (their buffers live across passes); the node never changes while
  // corrald runs, so the planner may keep what it derived from it (PassHints::nodes_version).
  const Snapshot& snap = pass_snapshot(static_cast<Time>(now()));
  if (book_) {  // a project with no grant left runs in the bonus queue (nci_stage demotes it)
    charge_running(static_cast<double>(snap.now));
    sched_.nci.grant_left = book_->ledger().grants_left(snap.now);
  }
  PassHints hints;
  hints.nodes_version = 1;
  schedule(snap, hints, sched_, ++passes_, planner_, plan_);
  if (monitor_) write_monitor(plan_.monitor);
  if (trace_on()) log_line("trace: schedule " + std::to_string((mono_now() - t0) * 1000) + " ms");
  // Drained (corral drain): the node stays in the pass as it is (the planner keeps what it derived
  // from it), but nothing new starts, and nothing is stopped or refused to make room for a start.
  if (drained_)
    std::erase_if(plan_.decisions, [](const Decision& d) {
      return d.action != Action::Reserve && d.action != Action::Resume && d.action != Action::Demote;
    });
  note_plan(plan_);
  apply(plan_);
}

// ------------------------------------------------------ decisions in: apply --

void Daemon::stop_for_cancel(JobRecord& rec, const std::string& comment) {
  rec.cancel_requested = true;
  rec.comment = comment;
  store_->put(rec);
  if (std::string err = launcher_->cancel(rec.id); !err.empty()) log_line("job " + std::to_string(rec.id) + ": cancel: " + err);
}

std::string Daemon::stop_for_requeue(JobRecord& rec, bool ck, const std::string& reason, bool pba) {
  const std::string id = std::to_string(rec.id);
  std::string err = ck ? launcher_->checkpoint(rec.id) : launcher_->requeue(rec.id);
  if (!err.empty()) {
    log_line("job " + id + ": " + (ck ? "checkpoint" : "requeue") + " failed: " + err);
    return err;
  }
  rec.requeue_requested = true;
  rec.held = false;
  if (pba && !ck) rec.pba_preemptions += 1;  // PBA's requeue bound (pba.hpp contract)
  rec.comment = reason;
  store_->put(rec);
  log_line("job " + id + (ck ? " checkpointing" : " requeueing") + (reason.empty() ? "" : ": " + reason));
  return "";
}

void Daemon::apply(const Plan& plan) {
  for (const auto& u : plan.updates) {
    if (JobRecord* r = store_->find(u.job); r && !r->ended()) {
      r->priority = u.priority;  // kept in memory; persisted with its next change
      r->cycles_pending = u.cycles_pending;
      snap_stale_.push_back(u.job);
    }
  }
  for (const Decision& d : plan.decisions) {
    JobRecord* rec = store_->find(d.job);
    std::string id = std::to_string(d.job);
    if (!rec || rec->ended()) {
      if (d.action != Action::Reserve) log_line("plan: job " + id + " is unknown or ended; decision skipped");
      continue;
    }
    bool pending = rec->state == proto::state::kPending;
    switch (d.action) {
      case Action::Start:
        if (!pending || rec->cancel_requested) {
          log_line("plan: job " + id + " is not pending; start skipped");
          break;
        }
        if (rec->array_id && !array_room(*rec)) break;  // its array runs its limit of tasks
        start_job(*rec, d);
        if (rec->array_id) dirty_ = true;  // its array hands out the next tasks at the next pass
        if (d.backfilled && rec->state == proto::state::kRunning) {
          // Kept in the journal: a restart still stops it at its window's end.
          rec->backfilled = true;
          rec->backfill_estimate = backfill_duration(to_job(*rec, preempt_mode_), sched_.planner);
          store_->put(*rec);
        }
        break;
      case Action::Reserve:
        if (pending) rec->comment = "reserved: " + (d.reason.empty() ? "resources held" : d.reason);
        break;
      case Action::Suspend:
      case Action::Resume: {
        bool sus = d.action == Action::Suspend;
        if (rec->state != (sus ? proto::state::kRunning : proto::state::kSuspended)) {
          log_line("plan: job " + id + " is " + rec->state + "; " + (sus ? "suspend" : "resume") + " skipped");
          break;
        }
        if (!sus && rec->held) break;  // suspended by an admin: only `corral resume` thaws it
        suspend_resume(*rec, sus, d.reason);  // PBA's suspensions do not count toward its requeue bound
        break;
      }
      case Action::Requeue:
      case Action::Checkpoint: {
        if (pending || rec->requeue_requested) break;  // stopping already
        stop_for_requeue(*rec, d.action == Action::Checkpoint, d.reason, d.pba_preemption);
        break;
      }
      case Action::Reject:
        if (pending) finish(*rec, EndReason::Rejected, -1, d.reason.empty() ? "can never run as asked" : d.reason);
        break;
      case Action::Demote:
        if (pending && !d.queue.empty()) {
          rec->spec.queue = d.queue;
          snap_stale_.push_back(d.job);
          rec->comment = "moved to queue " + d.queue + (d.reason.empty() ? "" : ": " + d.reason);
          store_->put(*rec);
          log_line("job " + id + " " + rec->comment);
        }
        break;
    }
  }
}

}  // namespace corral::agent
