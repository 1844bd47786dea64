// Why a pending job waits and when it is planned to start, as `squeue --start` and `qstat -s`
// tell: the jobs it depends on, its array's %max_running, the cores, memory or jobfs running
// jobs hold, the reservation of a job ahead of it, its project's allocation, or jobs ahead of it
// in the queue. A pass only keeps its reservations (note_plan); the reason is worked out when
// `corral stat` asks, so a pass over many pending jobs costs nothing more.
#include <algorithm>
#include <cctype>
#include <ctime>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"
#include "coordinator/wait_text.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

void Daemon::note_plan(const Plan& plan) {
  reserved_at_.clear();
  for (const Decision& d : plan.decisions)
    if (d.action == Action::Reserve) reserved_at_[d.job] = d.at;
}

void Daemon::wait_info(const JobRecord& rec, proto::JobInfo& j) const {
  if (rec.state != proto::state::kPending) return;
  if (!rec.hold.empty()) {
    j.wait_reason = proto::wait::kHeld;
    j.wait_detail = wait_text::held(rec.hold_by, rec.hold, rec.id);
    return;
  }
  if (dep_waiting_.count(rec.id)) {
    j.wait_reason = proto::wait::kDependency;
    j.wait_detail = dependency_text(rec);
    return;
  }
  if (rec.array_id && !array_room(rec)) {
    j.wait_reason = proto::wait::kArrayLimit;
    j.wait_detail = wait_text::array_limit(rec.array_id, rec.spec.array.max_running);
    return;
  }
  const auto planned = reserved_at_.find(rec.id);
  if (planned != reserved_at_.end()) j.planned_start = static_cast<double>(planned->second);
  // What running and suspended jobs hold now (a suspended job's cores are free, its memory not).
  const node::Topology& topo = launcher_->topology();
  std::int64_t cores = static_cast<std::int64_t>(topo.cores.size()) - slots_used(), mem = topo.mem_mb, jobfs = topo.jobfs_mb;
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    mem -= r.spec.mem_mb;
    jobfs -= r.spec.jobfs_mb;
  }
  const std::string lacks = wait_text::lacks({wait_text::short_of(slot_range(rec.spec).first, cores, "cores"),
                                              topo.mem_mb > 0 ? wait_text::short_of(rec.spec.mem_mb, mem, "MiB of memory") : "",
                                              topo.jobfs_mb > 0 ? wait_text::short_of(rec.spec.jobfs_mb, jobfs, "MiB of jobfs") : ""},
                                             "");
  if (!lacks.empty()) {
    j.wait_reason = proto::wait::kResources;
    j.wait_detail = lacks;
    return;
  }
  // It would fit now: a reservation ahead of it keeps the resources, or its project's share.
  for (const auto& [id, at] : reserved_at_) {
    if (id == rec.id) continue;
    j.wait_reason = proto::wait::kReservation;
    j.wait_detail = wait_text::reserved(id, at);
    return;
  }
  if (sched_.pba.enabled && !rec.spec.project.empty()) {
    const Time t = static_cast<Time>(now());
    j.wait_reason = proto::wait::kAllocation;
    j.wait_detail = wait_text::allocation(rec.spec.project, sched_.pba.plan.allocated_slots(rec.spec.project, t));
    return;
  }
  j.wait_reason = proto::wait::kPriority;
  j.wait_detail = wait_text::kPriority;
}

bool Daemon::stat_match(const Peer& p, const proto::StatReq& r, const JobRecord& rec) {
  return stat_match(p, r, rec.uid, rec.user, rec.spec.project, rec.state);
}

bool Daemon::stat_match(const Peer& p, const proto::StatReq& r, std::uint32_t uid, const std::string& user,
                        const std::string& project, const std::string& state) {
  if (r.mine && uid != p.uid) return false;
  if (!r.user.empty()) {
    const bool numeric = std::all_of(r.user.begin(), r.user.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (numeric ? std::to_string(uid) != r.user : user != r.user) return false;
  }
  if (!r.project.empty() && project != r.project) return false;
  return proto::state_listed(r.states, state);
}

}  // namespace corral::agent
