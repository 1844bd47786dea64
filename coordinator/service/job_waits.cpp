// Why pending jobs wait and when the coordinator's last pass plans to start them, for `corral
// stat` and `corral console` on any node (WaitAsk, proto/mesh_waits.hpp), worked out as a
// standalone node works it out (coordinator/wait_text.hpp): from the last pass's reservations,
// the replicated jobs and the nodes' reports. Nothing is kept per pass beyond the plan itself,
// and only the jobs asked about cost anything.
#include <algorithm>
#include <map>

#include "coordinator/service/coordinator_loop.hpp"
#include "coordinator/wait_text.hpp"
#include "proto/dependency.hpp"

namespace corral::service {
namespace {

std::string dependencies_text(const MeshState& state, const MeshJob& j) {
  std::string out;
  for (const proto::Dependency& d : j.spec.depend) {
    const MeshJob* o = state.job(d.job);
    out += (out.empty() ? "" : ", ") + proto::dependency_item(d, o ? o->state : "");
  }
  return out;
}

}  // namespace

// What the nodes that take jobs now (up, reporting) have free: a running job's cores and
// memory are held, a suspended job's memory only.
std::map<std::string, CoordinatorLoop::Free> CoordinatorLoop::free_room() const {
  std::map<std::string, Free> free;
  const std::uint64_t now = env_.now_ms();
  for (const auto& [name, n] : nodes_) {
    if (n.cores <= 0 || removed(name) || now - n.at_ms > kNodeStaleMs) continue;
    auto a = state_.data().nodes.find(name);
    if (a != state_.data().nodes.end() && a->second.state != proto::mesh::admin::kUp) continue;
    free[name] = Free{n.cores, n.mem_mb, n.mem_mb > 0};
  }
  for (std::uint64_t id : state_.live()) {
    const MeshJob& j = *state_.job(id);
    if (j.runs.empty() || (j.state != proto::state::kRunning && j.state != proto::state::kSuspended)) continue;
    const auto& nodes = j.runs.back().nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (auto f = free.find(nodes[i]); f != free.end()) {
        if (j.state == proto::state::kRunning) f->second.cores -= share_slots(j, i);
        f->second.mem_mb -= share_mem_mb(j, i);
      }
  }
  return free;
}

// Short of what, if anything: a job within one node's size against the best node, a job across
// nodes against them all (its chunks each whole on one node).
std::string CoordinatorLoop::lacks(const MeshJob& j, const std::map<std::string, Free>& free) const {
  const proto::JobSpec& s = j.spec;
  if (free.empty()) return "waits for a node: none that takes jobs (up, not drained) is reporting";
  std::int64_t best = 0, total = 0, chunks = 0, mem_best = 0, mem_total = 0, widest = 0;
  bool mem_known = true;
  for (const auto& [name, f] : free) {
    best = std::max(best, f.cores);
    total += std::max<std::int64_t>(0, f.cores);
    if (s.chunk_ncpus > 0) chunks += std::max<std::int64_t>(0, f.cores) / s.chunk_ncpus;
    mem_best = std::max(mem_best, f.mem_mb);
    mem_total += std::max<std::int64_t>(0, f.mem_mb);
    mem_known &= f.mem_known;
    widest = std::max<std::int64_t>(widest, nodes_.at(name).cores);
  }
  const std::int64_t need = proto::least_slots(s);
  const std::int64_t mem = proto::mem_for_slots(s, need);
  if (s.chunk_ncpus > 0)
    return wait_text::lacks({wait_text::short_of(s.ncpus / s.chunk_ncpus, chunks,
                                                 "chunks of " + std::to_string(s.chunk_ncpus) + " cpus")}, "");
  if (need <= widest)
    return wait_text::lacks({wait_text::short_of(need, best, "cores on one node"),
                             mem_known ? wait_text::short_of(mem, mem_best, "MiB of memory on one node") : ""}, "");
  return wait_text::lacks({wait_text::short_of(need, total, "cores"),
                           mem_known ? wait_text::short_of(mem, mem_total, "MiB of memory") : ""}, "");
}

proto::jobs::WaitAnswer CoordinatorLoop::waits(const std::vector<std::uint64_t>& jobs) const {
  proto::jobs::WaitAnswer a;
  if (!ready_) {
    a.status = "not_leader";
    a.leader = c_.is_leader() ? 0 : c_.leader_id();
    return a;
  }
  a.status = "ok";
  std::map<std::uint64_t, Time> reserved;
  for (const Decision& d : plan_.decisions)
    if (d.action == Action::Reserve) reserved.emplace(d.job, d.at);
  const auto free = free_room();
  for (std::uint64_t id : jobs) {
    const MeshJob* j = state_.job(id);
    if (!j || j->state != proto::state::kPending || !j->hold.empty()) continue;
    proto::jobs::JobWait w{id, 0, "", ""};
    if (auto r = reserved.find(id); r != reserved.end()) w.planned_start = static_cast<double>(r->second);
    auto other = std::find_if(reserved.begin(), reserved.end(), [id](const auto& r) { return r.first != id; });
    std::map<std::uint64_t, std::int64_t> room;  // this task's array alone: is its %max_running used up?
    if (blocked_.count(id)) {
      w.reason = proto::wait::kDependency;
      w.detail = dependencies_text(state_, *j);
    } else if (!task_room(*j, room)) {
      w.reason = proto::wait::kArrayLimit;
      w.detail = wait_text::array_limit(j->array_id, j->spec.array.max_running);
    } else if (std::string short_of = lacks(*j, free); !short_of.empty()) {
      w.reason = proto::wait::kResources;
      w.detail = short_of;
    } else if (other != reserved.end()) {
      w.reason = proto::wait::kReservation;
      w.detail = wait_text::reserved(other->first, other->second);
    } else if (sched_.pba.enabled && !j->spec.project.empty()) {
      w.reason = proto::wait::kAllocation;
      w.detail = wait_text::allocation(j->spec.project,
                                       sched_.pba.plan.allocated_slots(j->spec.project, static_cast<Time>(env_.wall_s())));
    } else {
      w.reason = proto::wait::kPriority;
      w.detail = wait_text::kPriority;
    }
    a.waits.push_back(std::move(w));
  }
  return a;
}

}  // namespace corral::service
