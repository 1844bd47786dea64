#include "coordinator/service/mesh_state.hpp"

#include <algorithm>

#include "coordinator/names.hpp"
#include "coordinator/nci/ledger.hpp"
#include "coordinator/service/mesh_charges.hpp"

namespace corral::service {
namespace {

namespace st = proto::state;
using proto::mesh::admin::kDrain;
using proto::mesh::admin::kRemoved;
using proto::mesh::admin::kUp;

constexpr std::string_view kSnapshotMagic = "corral-mesh-state";

Outcome refused(std::uint64_t job, std::string why) { return Outcome{false, std::move(why), job}; }
Outcome done(std::uint64_t job) { return Outcome{true, {}, job}; }

std::string job_name(std::uint64_t id) { return "job " + std::to_string(id); }

// Why run `run` is not the current run of `j` that is running or suspended;
// empty when it is.
std::string not_current_run(const MeshJob& j, std::int32_t run) {
  if (j.state != st::kRunning && j.state != st::kSuspended)
    return job_name(j.id) + " is " + j.state + ", not running";
  if (run != static_cast<std::int32_t>(j.runs.size()))
    return "run " + std::to_string(run) + " is not the current run (" +
           std::to_string(j.runs.size()) + ") of " + job_name(j.id);
  return {};
}

// Why `j` cannot be held or moved (empty: it can): it no longer waits, or it is an array
// being ended.
std::string not_pending(const MeshJob& j) {
  if (j.ending()) return "job array " + std::to_string(j.id) + " is ending (" + j.end_reason + "), not pending";
  if (j.state != st::kPending) return job_name(j.id) + " is " + j.state + ", not pending";
  return {};
}

}  // namespace

Outcome MeshState::apply(const proto::mesh::Entry& e) {
  ++d_.applied;
  Outcome o = std::visit([&](const auto& x) { return on(x); }, e);
  if (o.job != 0) track(o.job);
  return o;
}

void MeshState::track(std::uint64_t id) {
  auto it = d_.jobs.find(id);
  const bool live = it != d_.jobs.end() && it->second.state != st::kEnded;
  if (live) live_.insert(id);
  else live_.erase(id);
  if (it == d_.jobs.end() || it->second.array_id == 0) return;
  std::set<std::uint64_t>& tasks = live_tasks_[it->second.array_id];
  if (live) tasks.insert(id);
  else tasks.erase(id);
  if (tasks.empty()) live_tasks_.erase(it->second.array_id);
}

Outcome MeshState::apply_bytes(std::string_view bytes) {
  proto::mesh::Entry e;
  try {
    e = proto::mesh::decode_entry(bytes);
  } catch (const proto::ProtoError& ex) {
    ++d_.applied;
    return refused(0, ex.what());
  }
  return apply(e);
}

Outcome MeshState::on(const proto::mesh::JobAccepted& e) {
  if (!e.token.empty()) {
    auto it = d_.tokens.find(e.token);
    if (it != d_.tokens.end()) return done(it->second);  // a retried submission: same id
  }
  if (e.spec.array.on() && e.spec.array.tasks() <= 0) return refused(0, "a job array needs at least one task");
  MeshJob& j = add_job(e);
  if (e.spec.array.on()) j.array_next = e.spec.array.first;
  if (!e.token.empty()) d_.tokens.emplace(e.token, j.id);
  return done(j.id);
}

MeshJob& MeshState::add_job(const proto::mesh::JobAccepted& e) {
  MeshJob j;
  j.id = d_.next_id++;
  j.spec = e.spec;
  j.user = e.user;
  j.uid = e.uid;
  j.gid = e.gid;
  j.submit_time = e.submit_time;
  j.state = std::string(st::kPending);
  const std::uint64_t id = j.id;
  return d_.jobs.emplace(id, std::move(j)).first->second;
}

Outcome MeshState::on(const proto::mesh::JobStarted& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  if (std::string why = stale(e.term, e.decision); !why.empty()) return refused(e.job, why);
  if (j.is_array()) return refused(e.job, job_name(e.job) + " is a job array: its tasks run, never the array itself");
  if (j.state != st::kPending) return refused(e.job, job_name(e.job) + " is " + j.state + ", not pending");
  if (e.run != static_cast<std::int32_t>(j.runs.size()) + 1)
    return refused(e.job, "run " + std::to_string(e.run) + " is not the next run (" +
                              std::to_string(j.runs.size() + 1) + ") of " + job_name(e.job));
  if (e.nodes.empty()) return refused(e.job, "a start needs at least one node");
  if ((!e.slots.empty() && e.slots.size() != e.nodes.size()) || (!e.mem_mb.empty() && e.mem_mb.size() != e.nodes.size()))
    return refused(e.job, "a start needs one share per node");
  for (std::size_t i = 0; i < e.nodes.size(); ++i)
    if (std::find(e.nodes.begin(), e.nodes.begin() + static_cast<std::ptrdiff_t>(i), e.nodes[i]) !=
        e.nodes.begin() + static_cast<std::ptrdiff_t>(i))
      return refused(e.job, "node " + e.nodes[i] + " named twice in one start");
  for (const auto& n : e.nodes) {
    auto nit = d_.nodes.find(n);
    if (nit != d_.nodes.end() && nit->second.state != kUp)
      return refused(e.job, "node " + n + (nit->second.state == kDrain ? " is drained" : " was removed from the mesh"));
  }
  take(e.term, e.decision);
  MeshRun r;
  r.nodes = e.nodes;
  r.term = e.term;
  r.decision = e.decision;
  r.start = e.time;
  r.backfilled = e.backfilled;
  r.backfill_estimate = e.backfill_estimate;
  r.slots = e.slots;
  r.mem_mb = e.mem_mb;
  r.charge = e.charge > 0 ? e.charge : 0;
  if (d_.charge_origin == 0) d_.charge_origin = week_monday(e.time);
  j.runs.push_back(std::move(r));
  j.state = std::string(st::kRunning);
  return done(e.job);
}

Outcome MeshState::on(const proto::mesh::JobEnded& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  if (e.reason.empty()) return refused(e.job, "an end needs a reason");
  if (j.is_array()) return end_array(j, e);
  if (e.run == 0) {  // ended while waiting (e.g. cancelled)
    if (j.state != st::kPending)
      return refused(e.job, job_name(e.job) + " is " + j.state + ": give the run that ends");
  } else {
    std::string why = not_current_run(j, e.run);
    if (!why.empty()) return refused(e.job, why);
    MeshRun& r = j.runs.back();
    r.end = e.time;
    r.end_reason = e.reason;
    r.exit_code = e.exit_code;
    if (r.suspended_since > 0 && e.time > r.suspended_since) r.suspended_s += e.time - r.suspended_since;
    r.suspended_since = 0;
    charge_run(j, e.time);
  }
  j.state = std::string(st::kEnded);
  j.end_reason = e.reason;
  j.exit_code = e.exit_code;
  j.end_time = e.time;
  j.end_message = e.message;
  if (j.array_id == 0) return done(e.job);
  track(j.id);
  auto arr = d_.jobs.find(j.array_id);
  if (arr == d_.jobs.end() || arr->second.state == st::kEnded) return done(e.job);
  if (!arr->second.ending() && e.reason != name(EndReason::Completed)) arr->second.array_failed += 1;
  settle_array(arr->second, e.time);
  return done(e.job);
}

Outcome MeshState::on(const proto::mesh::JobRequeued& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  std::string why = not_current_run(j, e.run);
  if (!why.empty()) return refused(e.job, why);
  MeshRun& r = j.runs.back();
  r.end = e.time;
  r.end_reason = "preempted";
  r.stopping.clear();
  if (r.suspended_since > 0 && e.time > r.suspended_since) r.suspended_s += e.time - r.suspended_since;
  r.suspended_since = 0;
  charge_run(j, e.time);
  j.checkpoints = std::max(j.checkpoints, e.checkpoints);
  j.work_done = std::max(j.work_done, e.work_done);
  j.state = std::string(st::kPending);
  if (!r.cancel_by.empty()) {  // cancelled while being stopped: it never waits again
    j.state = std::string(st::kEnded);
    j.end_reason = "cancelled";
    j.end_time = e.time;
    j.end_message = "cancelled by " + r.cancel_by + " while its run was being stopped (" + e.reason + ")";
  }
  return done(e.job);
}

Outcome MeshState::on(const proto::mesh::CancelAsked& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  if (std::string why = not_current_run(j, e.run); !why.empty()) return refused(e.job, why);
  if (e.who.empty()) return refused(e.job, "a cancel needs who asked it");
  MeshRun& r = j.runs.back();
  if (r.cancel_by.empty()) r.cancel_by = e.who;  // the first cancel stays: it is being carried out
  return done(e.job);
}

std::string MeshState::stale(std::uint64_t term, std::uint64_t decision) const {
  if (term < d_.term)
    return "decision of term " + std::to_string(term) + " is older than the current term " + std::to_string(d_.term);
  if (term == d_.term && d_.decisions.count(decision))
    return "decision " + std::to_string(decision) + " of term " + std::to_string(term) + " already applied";
  return {};
}

void MeshState::take(std::uint64_t term, std::uint64_t decision) {
  if (term > d_.term) {
    d_.term = term;
    d_.decisions.clear();
  }
  d_.decisions.insert(decision);
}

Outcome MeshState::on(const proto::mesh::JobOrdered& e) {
  namespace order = proto::mesh::order;
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  if (std::string why = stale(e.term, e.decision); !why.empty()) return refused(e.job, why);
  if (std::string why = not_current_run(j, e.run); !why.empty()) return refused(e.job, why);
  MeshRun& r = j.runs.back();
  if (!r.stopping.empty()) return refused(e.job, job_name(e.job) + " is being stopped already (" + r.stopping + ")");
  const bool sus = e.action == order::kSuspend, res = e.action == order::kResume;
  if (!sus && !res && e.action != order::kRequeue && e.action != order::kCheckpoint)
    return refused(e.job, "order '" + e.action + "' is not suspend, resume, requeue or checkpoint");
  if ((sus && j.state != st::kRunning) || (res && j.state != st::kSuspended))
    return refused(e.job, "cannot " + e.action + " " + job_name(e.job) + ": it is " + j.state);
  take(e.term, e.decision);
  if (sus) {
    r.suspended_since = e.time;
    r.held = e.held;
    j.state = std::string(st::kSuspended);
  } else if (res) {
    if (e.time > r.suspended_since) r.suspended_s += e.time - r.suspended_since;
    r.suspended_since = 0;
    r.held = false;
    j.state = std::string(st::kRunning);
  } else {
    r.stopping = e.action;
    if (e.pba_preemption && e.action == order::kRequeue) j.pba_preemptions += 1;
  }
  r.order = e.action;
  r.order_reason = e.reason;
  r.order_term = e.term;
  r.order_decision = e.decision;
  r.order_pba = e.pba_preemption;
  r.order_acked.clear();
  r.order_failed = false;
  return done(e.job);
}

Outcome MeshState::on(const proto::mesh::JobSuspended& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  std::string why = not_current_run(j, e.run);
  if (!why.empty()) return refused(e.job, why);
  if (e.order_decision != 0) return acknowledged(j, e);
  std::string_view from = e.suspended ? st::kRunning : st::kSuspended;
  if (j.state != from)
    return refused(e.job, job_name(e.job) + " is already " + j.state);
  j.state = std::string(e.suspended ? st::kSuspended : st::kRunning);
  return done(e.job);
}

Outcome MeshState::acknowledged(MeshJob& j, const proto::mesh::JobSuspended& e) {
  namespace order = proto::mesh::order;
  MeshRun& r = j.runs.back();
  if ((r.order != order::kSuspend && r.order != order::kResume) || e.order_term != r.order_term ||
      e.order_decision != r.order_decision)
    return refused(j.id, "not the last suspend or resume order of " + job_name(j.id));
  if (std::find(r.nodes.begin(), r.nodes.end(), e.node) == r.nodes.end())
    return refused(j.id, "node '" + e.node + "' does not run " + job_name(j.id));
  if (r.order_failed) return done(j.id);  // put back already: the run stays as it was
  const bool suspend = r.order == order::kSuspend;
  if (e.suspended == suspend) {
    if (std::find(r.order_acked.begin(), r.order_acked.end(), e.node) == r.order_acked.end())
      r.order_acked.push_back(e.node);
    return done(j.id);
  }
  // The node failed the order: the run is as it was before it (a failed resume leaves it
  // frozen from now; the pass may resume it again).
  r.order_failed = true;
  r.order_reason = r.order + " failed on " + e.node + (e.reason.empty() ? "" : ": " + e.reason);
  r.held = false;
  j.state = std::string(suspend ? st::kRunning : st::kSuspended);
  r.suspended_since = suspend ? 0 : e.time;
  return done(j.id);
}

Outcome MeshState::on(const proto::mesh::NodeAdmin& e) {
  if (e.node.empty()) return refused(0, "no node named");
  if (e.state != kUp && e.state != kDrain && e.state != kRemoved)
    return refused(0, "node state '" + e.state + "' is not up, drain or removed");
  d_.nodes[e.node] = MeshNode{e.state, e.reason};
  return done(0);
}

Outcome MeshState::on(const proto::mesh::GrantSet& e) {
  if (e.project.empty()) return refused(0, "no project named");
  if (!(e.su >= 0)) return refused(0, "a grant cannot be negative");
  if (e.every < 0) return refused(0, "a grant's period cannot be negative");
  d_.grants[e.project] = MeshGrant{e.su, e.every};
  return done(0);
}

Outcome MeshState::on(const proto::mesh::Charge& e) {
  return refused(e.job, "a run is charged when its end is applied, not by a charge entry");
}

void MeshState::charge_run(MeshJob& j, double at) {
  MeshRun& r = j.runs.back();
  if (r.charged_s >= 0) return;
  r.charged_s = charged_seconds(r.start, at, r.suspended_s);
  r.su = service_units(r.charged_s, run_cpus(j, r), r.charge);
}

Outcome MeshState::on(const proto::mesh::AllocationSet& e) {
  std::vector<proto::AllocSetting> all = e.changes;  // empty: an entry of one change
  if (all.empty()) all.push_back(proto::AllocSetting{e.project, e.week, e.slots});
  for (const proto::AllocSetting& c : all) {  // every change checked before any is made
    if (c.project.empty()) return refused(0, "no project named");
    if (c.slots < 0) return refused(0, "an allocation cannot be negative (" + c.project + " " + c.week + ")");
  }
  for (const proto::AllocSetting& c : all) d_.allocations[c.project + "/" + c.week] = c.slots;
  return done(0);
}

Outcome MeshState::on(const proto::mesh::JobHeld& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  if (std::string why = not_pending(j); !why.empty()) return refused(e.job, why);
  if (!e.hold.empty() && e.hold != proto::hold::kUser && e.hold != proto::hold::kOperator)
    return refused(e.job, "hold '" + e.hold + "' is not user or operator");
  if (e.hold.empty() && j.hold.empty()) return refused(e.job, job_name(e.job) + " is not held");
  const std::string was = j.hold;
  j.hold = e.hold;
  j.hold_by = e.hold.empty() ? "" : e.who;
  if (!j.is_array()) return done(e.job);
  // An array's hold holds its waiting tasks; its release releases those its kind of hold held.
  for (std::uint64_t id : live_tasks(j.id)) {
    MeshJob& t = d_.jobs.at(id);
    if (t.state != st::kPending || t.hold.empty() != !e.hold.empty()) continue;
    if (e.hold.empty() && t.hold != was && t.hold != proto::hold::kUser) continue;
    t.hold = j.hold;
    t.hold_by = j.hold_by;
  }
  return done(e.job);
}

Outcome MeshState::on(const proto::mesh::JobMoved& e) {
  auto it = d_.jobs.find(e.job);
  if (it == d_.jobs.end()) return refused(e.job, "no " + job_name(e.job));
  MeshJob& j = it->second;
  if (std::string why = not_pending(j); !why.empty()) return refused(e.job, why);
  if (e.queue.empty()) return refused(e.job, "no queue named");
  j.spec.queue = e.queue;
  if (j.is_array())  // its waiting tasks move with it
    for (std::uint64_t id : live_tasks(j.id))
      if (MeshJob& t = d_.jobs.at(id); t.state == st::kPending) t.spec.queue = e.queue;
  return done(e.job);
}

std::string MeshState::snapshot() const {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(kSnapshotMagic);
  pk.pack(proto::mesh::kVersion);
  pk.pack(d_);
  return std::string(buf.data(), buf.size());
}

void MeshState::restore(std::string_view bytes) {
  MeshData d;
  try {
    auto oh = msgpack::unpack(bytes.data(), bytes.size());
    const msgpack::object& o = oh.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 3 ||
        o.via.array.ptr[0].as<std::string_view>() != kSnapshotMagic)
      throw proto::ProtoError("not a mesh state snapshot");
    if (o.via.array.ptr[1].as<std::uint32_t>() != proto::mesh::kVersion)
      throw proto::ProtoError("mesh state snapshot of another version");
    o.via.array.ptr[2].convert(d);
  } catch (const proto::ProtoError&) {
    throw;
  } catch (const std::exception& ex) {
    throw proto::ProtoError(std::string("bad mesh state snapshot: ") + ex.what());
  }
  d_ = std::move(d);
  live_.clear();
  tasks_.clear();
  live_tasks_.clear();
  for (const auto& [id, j] : d_.jobs) {
    if (j.state != st::kEnded) live_.insert(live_.end(), id);
    if (j.array_id == 0) continue;
    tasks_[{j.array_id, j.array_index}] = id;
    if (j.state != st::kEnded) live_tasks_[j.array_id].insert(id);
  }
}

const MeshJob* MeshState::job(std::uint64_t id) const {
  auto it = d_.jobs.find(id);
  return it == d_.jobs.end() ? nullptr : &it->second;
}

std::vector<std::uint64_t> MeshState::jobs_on(const std::string& node) const {
  std::vector<std::uint64_t> out;
  for (std::uint64_t id : live_) {
    const MeshJob& j = d_.jobs.at(id);
    if (j.state != st::kRunning && j.state != st::kSuspended) continue;
    const auto& nodes = j.runs.back().nodes;
    if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) out.push_back(id);
  }
  return out;
}

}  // namespace corral::service
