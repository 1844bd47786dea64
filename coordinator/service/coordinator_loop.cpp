#include "coordinator/service/coordinator_loop.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "coordinator/planner/planner.hpp"
#include "coordinator/service/job_shares.hpp"
#include "coordinator/service/spec_job.hpp"

namespace corral::service {

namespace {

constexpr std::uint64_t kTickMs = 50;
// While jobs wait, a pass at least this often even when nothing changed (time-driven policy:
// NCI's start window, the checkpoint policy's backfill windows), as a standalone node's cycle.
constexpr std::uint64_t kIdlePassMs = 5000;

double thread_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

Job to_job(const MeshJob& m) {
  Job j;
  set_request(j, m.spec, PreemptMode::Requeue);
  j.id = m.id;
  j.user = m.user;
  j.submit = static_cast<Time>(m.submit_time);
  j.work_done = static_cast<Time>(m.work_done);
  j.pba_preemptions = m.pba_preemptions;
  for (const MeshRun& r : m.runs) {
    if (j.first_start < 0) j.first_start = static_cast<Time>(r.start);
    if (r.end_reason == "preempted") ++j.requeues;
  }
  return j;
}

}  // namespace

CoordinatorLoop::CoordinatorLoop(Env& env, Consensus& c, const MeshState& state, std::string mesh,
                                 SchedConfig sched, std::vector<Queue> queues, Push push)
    : env_(env), c_(c), state_(state), mesh_(std::move(mesh)), sched_(std::move(sched)),
      plan_file_(sched_.pba.plan), queues_(std::move(queues)), push_(std::move(push)) {}

CoordinatorLoop::~CoordinatorLoop() { *alive_ = false; }

void CoordinatorLoop::leadership(bool leader, std::uint64_t term) {
  ready_ = false;
  proposing_.clear();
  unacked_.clear();
  ordering_.clear();
  feeding_.clear();
  demoted_.clear();
  if (!leader) return;
  term_ = term;
  next_decision_ = 0;
  c_.barrier([this, alive = alive_, term](Status st) {
    if (!*alive || st != Status::ok || !c_.is_leader() || c_.term() != term) return;
    ready_ = true;
    ready_at_ms_ = env_.now_ms();
    dirty_ = true;
    // Every committed start again, to the node it names: settled there, never elsewhere.
    // Then each run's last order: a node that carried it out already just acknowledges.
    for (std::uint64_t id : state_.live())
      if (const MeshJob& j = *state_.job(id); j.state == proto::state::kRunning || j.state == proto::state::kSuspended) {
        push_start(id);
        if (!j.runs.back().order.empty()) push_order(id);
        stop_cancelled_task(j);
      }
  });
  if (!ticking_) {
    ticking_ = true;
    env_.post(kTickMs, [this, alive = alive_] {
      if (*alive) tick();
    });
  }
}

void CoordinatorLoop::node(const NodeReport& r) {
  auto it = nodes_.find(r.name);
  if (it == nodes_.end() || it->second.cores != r.cores || it->second.mem_mb != r.mem_mb) dirty_ = true;
  nodes_[r.name] = r;
}

// A node's answer to a start or an order: settled for that node (whatever it answered: a node
// that refused or failed says so in its report and the log, not by being asked again).
void CoordinatorLoop::on_ack(const proto::jobs::StartAck& a) {
  const bool order = !a.order.empty();
  for (auto it = unacked_.lower_bound({a.job, "", false}); it != unacked_.end() && std::get<0>(it->first) == a.job;
       ++it) {
    if (std::get<2>(it->first) != order) continue;
    auto n = nodes_.find(std::get<1>(it->first));
    bool from = it->second.member == a.from || (n != nodes_.end() && n->second.member == a.from);
    if (!from) continue;
    if (auto* s = std::get_if<proto::jobs::StartJob>(&it->second.msg); s && s->run != a.run) continue;
    if (auto* o = std::get_if<proto::jobs::JobOrder>(&it->second.msg);
        o && (o->decision != a.decision || o->decided_term != a.decided_term))
      continue;
    if (auto* o = std::get_if<proto::jobs::JobOrder>(&it->second.msg)) record_freeze(*o, std::get<1>(it->first), a);
    unacked_.erase(it);
    return;
  }
}

void CoordinatorLoop::tick() {
  if (!c_.is_leader()) {
    ready_ = false;
    ticking_ = false;
    return;
  }
  if (ready_) {
    resend_unacked();
    resend_cancels();
    reconcile();
    follow_grants();
    if (c_.last_applied() != seen_applied_) dirty_ = true;
    if (env_.now_ms() >= next_pass_) dirty_ = true;
    if (dirty_) pass();
  }
  env_.post(kTickMs, [this, alive = alive_] {
    if (*alive) tick();
  });
}

Snapshot CoordinatorLoop::build(Time now, std::vector<std::string>& names) const {
  Snapshot s;
  s.now = now;
  s.queues = queues_;
  std::map<std::string, std::uint32_t> index;
  std::uint64_t t = env_.now_ms();
  for (const auto& [name, r] : nodes_) {
    if (t - r.at_ms > kNodeStaleMs || r.cores <= 0) continue;
    const MeshNode* admin = nullptr;
    if (auto a = state_.data().nodes.find(name); a != state_.data().nodes.end()) admin = &a->second;
    Node n;
    n.name = name;
    n.cores = r.cores;
    n.mem_mb = r.mem_mb;
    n.jobfs_mb = r.jobfs_mb;
    n.up = !admin || admin->state == proto::mesh::admin::kUp;
    index[name] = static_cast<std::uint32_t>(s.nodes.size());
    s.nodes.push_back(std::move(n));
    names.push_back(name);
  }
  std::map<std::uint64_t, std::int64_t> room;  // arrays' starts their %max_running allows
  std::set<std::uint64_t> held;  // jobs some node reports running
  for (const auto& [name, r] : nodes_)
    if (t - r.at_ms <= kNodeStaleMs) held.insert(r.running.begin(), r.running.end());
  for (std::uint64_t id : state_.live()) {
    const MeshJob& j = *state_.job(id);
    if (j.state == proto::state::kPending) {
      if (!j.is_array() && !proposing_.count(id) && j.hold.empty() && !blocked_.count(id) && shares_released(j, held) &&
          task_room(j, room))
        s.pending.push_back(to_job(j));
      continue;
    }
    if (j.state != proto::state::kRunning && j.state != proto::state::kSuspended) continue;
    const MeshRun& run = j.runs.back();
    RunningJob rj;
    rj.job = to_job(j);
    rj.start = static_cast<Time>(run.start);
    rj.suspended = j.state == proto::state::kSuspended;
    // Suspended time does not count against the walltime (as on a standalone node).
    double sus = run.suspended_s + (rj.suspended && run.suspended_since > 0 ? now - run.suspended_since : 0);
    rj.suspended_for = static_cast<Time>(std::max(0.0, sus));
    rj.expected_end = rj.job.walltime > 0
                          ? rj.start + rj.suspended_for + rj.job.walltime + sched_.planner.duration_offset
                          : kForever;
    rj.slots = rj.job.slots_min;
    // The NCI resume window counts from this suspension; a user's suspension has none.
    if (rj.suspended && !run.held && run.suspended_since > 0) rj.suspended_since = static_cast<Time>(run.suspended_since);
    rj.backfilled = run.backfilled && run.stopping.empty();  // unless its checkpoint is being taken
    rj.backfill_estimate = static_cast<Time>(run.backfill_estimate);
    if (run.slots.size() == run.nodes.size() && !run.slots.empty()) {
      rj.slots = 0;
      for (std::int32_t sl : run.slots) rj.slots += sl;
    }
    for (std::size_t i = 0; i < run.nodes.size(); ++i)
      if (auto it = index.find(run.nodes[i]); it != index.end()) {
        int sl = run.slots.size() == run.nodes.size() ? run.slots[i] : rj.slots;
        rj.placement.push_back(Placement{it->second, static_cast<std::uint32_t>(sl), {}, 1});
      }
    // A job on a node not reporting holds nothing the pass could give away.
    if (!rj.placement.empty()) s.running.push_back(std::move(rj));
  }
  return s;
}

void CoordinatorLoop::pass() {
  dirty_ = false;
  seen_applied_ = c_.last_applied();
  // A pass while any job waits, and while one is suspended (it may be resumed) or backfilled
  // (it may be checkpointed) even with none waiting.
  bool waiting = false, watched = false;
  for (std::uint64_t id : state_.live()) {
    const MeshJob& j = *state_.job(id);
    if (j.state == proto::state::kPending && !proposing_.count(id) && j.hold.empty()) waiting = true;
    if (j.state == proto::state::kSuspended || (j.state == proto::state::kRunning && j.runs.back().backfilled))
      watched = true;
    if (waiting && watched) break;
  }
  next_pass_ = waiting ? env_.now_ms() + kIdlePassMs : ~std::uint64_t{0};
  if (!waiting && !watched) return;
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_ms();
  settle_dependencies();
  feed_arrays();
  std::vector<std::string> names;
  Snapshot snap = build(static_cast<Time>(env_.wall_s()), names);
  if (snap.nodes.empty()) return;
  follow_allocations();
  charge_view(snap.now);
  schedule(snap, kNoHints, sched_, ++passes_, planner_, plan_);
  for (const Decision& d : plan_.decisions)
    if (d.action == Action::Demote) demote(d);
  // Stops first: a start on cores a suspension frees reaches the node after it.
  for (const Decision& d : plan_.decisions)
    if (d.action == Action::Suspend || d.action == Action::Resume || d.action == Action::Requeue ||
        d.action == Action::Checkpoint)
      order(d);
  std::size_t starts = 0;
  const bool whole = whole_mesh_reports();
  for (const Decision& d : plan_.decisions)
    if (d.action == Action::Start && !d.placement.empty()) {
      decide(d, names);
      ++starts;
    } else if (d.action == Action::Reject && whole) {
      end_pending(d.job, EndReason::Rejected, d.reason);
    }
  if (watch_)
    watch_(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
           thread_cpu_ms() - cpu0, snap.pending.size(), starts);
}

void CoordinatorLoop::decide(const Decision& d, const std::vector<std::string>& names) {
  const MeshJob* j = state_.job(d.job);
  if (!j || j->state != proto::state::kPending) return;
  proto::mesh::JobStarted e;
  if (!job_shares(d, names, j->spec, e)) return;
  e.job = d.job;
  e.run = static_cast<std::int32_t>(j->runs.size()) + 1;
  e.decision = ++next_decision_;
  e.term = term_;
  e.time = env_.wall_s();
  e.charge = start_charge(*j);
  if (d.backfilled) {  // its window, kept: a later pass checkpoints it when the window ends
    e.backfilled = true;
    e.backfill_estimate = static_cast<double>(backfill_duration(to_job(*j), sched_.planner));
  }
  proposing_.insert(d.job);
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, job = d.job](const Proposed& p) {
    if (!*alive) return;
    proposing_.erase(job);
    dirty_ = true;
    if (p.status == Status::ok && p.applied.ok) push_start(job);
  });
}

// The current run's start, to each of its nodes (again).
void CoordinatorLoop::push_start(std::uint64_t job) {
  const MeshJob* j = state_.job(job);
  if (!j || j->runs.empty()) return;
  for (const std::string& node : j->runs.back().nodes) push_start(job, node);
}

void CoordinatorLoop::push_start(std::uint64_t job, const std::string& node) {
  const MeshJob* j = state_.job(job);
  if (!j || j->runs.empty() || j->runs.back().nodes.empty()) return;
  const MeshRun& run = j->runs.back();
  proto::jobs::StartJob s;
  s.mesh = mesh_;
  s.from = c_.id();
  s.term = term_;
  s.decided_term = run.term;
  s.decision = run.decision;
  s.job = job;
  s.run = static_cast<std::int32_t>(j->runs.size());
  s.nodes = run.nodes;
  s.slots = run.slots;
  s.mem_mb = run.mem_mb;
  s.spec = proto::mesh::JobAccepted{j->spec, j->user, j->uid, j->gid, j->submit_time, ""};
  s.work_done = j->work_done;
  s.checkpoints = j->checkpoints;
  s.array_id = j->array_id;
  s.array_index = j->array_index;
  send_until_acked(job, node, proto::jobs::Message{std::move(s)});
}

void CoordinatorLoop::send_until_acked(std::uint64_t job, const std::string& node, proto::jobs::Message m) {
  const bool order = std::holds_alternative<proto::jobs::JobOrder>(m);
  Unacked& u = unacked_[{job, node, order}];
  auto n = nodes_.find(node);
  u.member = n == nodes_.end() ? 0 : n->second.member;
  u.msg = std::move(m);
  u.sent_ms = env_.now_ms();
  if (u.member != 0) push_(u.member, u.msg);
}

void CoordinatorLoop::resend_unacked() {
  std::uint64_t now = env_.now_ms();
  for (auto it = unacked_.begin(); it != unacked_.end();) {
    const MeshJob* j = state_.job(std::get<0>(it->first));
    Unacked& u = it->second;
    const auto* o = std::get_if<proto::jobs::JobOrder>(&u.msg);
    const std::int32_t run = o ? o->run : std::get<proto::jobs::StartJob>(u.msg).run;
    const bool live = j && (o ? j->state == proto::state::kRunning || j->state == proto::state::kSuspended
                              : j->state != proto::state::kEnded);
    if (!live || static_cast<std::int32_t>(j->runs.size()) != run) {
      it = unacked_.erase(it);  // ended or requeued meanwhile: nothing left to deliver
      continue;
    }
    if (now - u.sent_ms >= kResendMs) {
      if (u.member == 0)
        if (auto n = nodes_.find(std::get<1>(it->first)); n != nodes_.end()) u.member = n->second.member;
      u.sent_ms = now;
      if (u.member != 0) push_(u.member, u.msg);
    }
    ++it;
  }
}

// A run the log places on a node whose fresh report does not list it: its
// start again, to that node. A node that has it answers from its journal (and
// sends its end again when it ended: an end lost with a crash of its agent
// would otherwise hold the run open for ever); a node that never got it starts it.
void CoordinatorLoop::reconcile() {
  std::uint64_t now = env_.now_ms();
  if (now < next_reconcile_) return;
  next_reconcile_ = now + kResendMs;
  for (std::uint64_t id : state_.live()) {
    const MeshJob& j = *state_.job(id);
    if (j.state != proto::state::kRunning && j.state != proto::state::kSuspended) continue;
    for (const std::string& node : j.runs.back().nodes) {
      if (unacked_.count({id, node, false})) continue;
      auto n = nodes_.find(node);
      if (n == nodes_.end() || now - n->second.at_ms > kNodeStaleMs) continue;
      const std::vector<std::uint64_t>& runs = n->second.running;
      if (std::find(runs.begin(), runs.end(), id) == runs.end()) push_start(id, node);
    }
  }
  for (const auto& [name, n] : nodes_)
    if (now - n.at_ms <= kNodeStaleMs) release_shares(n);
}

}  // namespace corral::service

namespace corral::service {

void CoordinatorLoop::cancel(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  if (!c_.is_leader()) return done(DeskAnswer{"not_leader", 0, c_.leader_id(), "", ""});
  // A handover needs no current state: a coordinator told to stop right after its election.
  if (ask.action == proto::node_action::kHandover) return handover_ask(ask, done);
  if (!ready_) return done(DeskAnswer{"error", 0, 0, "the coordinator is not current yet", ""});
  if (!ask.action.empty() && ask.action != "cancel") return operate(ask, done);
  std::string id = std::to_string(ask.job);
  const MeshJob* j = state_.job(ask.job);
  if (!j) return done(DeskAnswer{"refused", ask.job, 0, "unknown job id " + id, "not_found"});
  if (!ask.admin && ask.uid != j->uid)
    return done(DeskAnswer{"refused", ask.job, 0,
                           "job " + id + " belongs to " + j->user + "; only its owner, root or an operator may cancel it",
                           "permission"});
  if (j->state == proto::state::kEnded)
    return done(DeskAnswer{"refused", ask.job, 0, "job " + id + " has already ended (" + j->end_reason + ")", "invalid"});
  // A start being committed: asked again once it is settled.
  if (proposing_.count(ask.job)) return done(DeskAnswer{"error", 0, 0, "a start of it is being committed", ""});
  if (j->is_array()) return cancel_array(*j, ask, done);
  if (j->state == proto::state::kPending) {
    proto::mesh::JobEnded e{ask.job, 0, "cancelled", -1, env_.wall_s()};
    c_.propose(proto::mesh::encode_entry(e), [done, job = ask.job](const Proposed& p) {
      if (p.status == Status::ok && p.applied.ok) done(DeskAnswer{"ok", job, 0, std::string(proto::state::kEnded), ""});
      else done(DeskAnswer{"error", 0, 0, p.status == Status::ok ? p.applied.reason : std::string(status_name(p.status)), ""});
    });
    return;
  }
  // Running: the cancel is committed first, so that a new coordinator goes on sending it.
  if (!j->runs.back().cancel_by.empty()) {
    push_cancel(*j, j->runs.back().cancel_by);
    return done(DeskAnswer{"ok", ask.job, 0, j->state, ""});
  }
  commit_cancel(*j, ask.who, [done, job = ask.job](const Proposed& p, const MeshJob* now) {
    if (p.status != Status::ok || !p.applied.ok)
      return done(DeskAnswer{"error", 0, 0, p.status == Status::ok ? p.applied.reason : std::string(status_name(p.status)), ""});
    done(DeskAnswer{"ok", job, 0, now ? now->state : std::string(proto::state::kRunning), ""});
  });
}

void CoordinatorLoop::commit_cancel(const MeshJob& j, const std::string& who,
                                    std::function<void(const Proposed&, const MeshJob*)> after) {
  proto::mesh::CancelAsked e{j.id, static_cast<std::int32_t>(j.runs.size()), who, env_.wall_s()};
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, after = std::move(after), job = j.id](const Proposed& p) {
    const MeshJob* now = *alive ? state_.job(job) : nullptr;
    if (now && p.status == Status::ok && p.applied.ok && c_.is_leader()) push_cancel(*now, now->runs.back().cancel_by);
    if (after) after(p, now);
  });
}

}  // namespace corral::service
