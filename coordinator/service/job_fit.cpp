// Whether a job can ever run in this mesh. A standalone node refuses a job larger than itself;
// a mesh knows its own size only from its nodes' reports, and a node may be away for a while.
// So a new coordinator judges nothing until every node that is up has had the time to report
// (kNodeStaleMs after its barrier); then a submission no set of the nodes it has heard from could
// hold, however idle, is refused, and the pass's rejections (the planner's "can never run", the
// -now y jobs that cannot start at once) are applied while every node heard from is reporting
// and up, so that no job is turned away because part of the mesh is briefly missing.
#include <algorithm>

#include "coordinator/names.hpp"
#include "coordinator/service/coordinator_loop.hpp"

namespace corral::service {

bool CoordinatorLoop::removed(const std::string& node) const {
  auto a = state_.data().nodes.find(node);
  return a != state_.data().nodes.end() && a->second.state == proto::mesh::admin::kRemoved;
}

bool CoordinatorLoop::settled() const { return ready_ && env_.now_ms() - ready_at_ms_ >= kNodeStaleMs; }

std::string CoordinatorLoop::too_large(const proto::JobSpec& s) const {
  if (!settled()) return "";
  int nodes = 0, cores = 0, chunks_fit = 0;
  std::int64_t mem = 0;
  bool mem_known = true;
  for (const auto& [name, n] : nodes_) {
    if (n.cores <= 0 || removed(name)) continue;
    ++nodes;
    cores += n.cores;
    if (s.chunk_ncpus > 0) chunks_fit += n.cores / s.chunk_ncpus;
    mem_known &= n.mem_mb > 0;
    mem += n.mem_mb;
  }
  if (nodes == 0) return "";
  const std::string mesh = "the mesh's " + std::to_string(nodes) + " node(s) have ";
  const int want = proto::least_slots(s);
  if (s.chunk_ncpus > 0 && chunks_fit < s.ncpus / s.chunk_ncpus)
    return "the job asks for " + std::to_string(s.ncpus / s.chunk_ncpus) + " chunk(s) of " +
           std::to_string(s.chunk_ncpus) + " cpus, each on one node; " + mesh + "room for " +
           std::to_string(chunks_fit) + " such chunk(s) in all";
  if (want > cores)
    return "the job asks for " + std::to_string(want) + " cpus; " + mesh + std::to_string(cores) + " cores in all";
  if (const std::int64_t need = proto::mem_for_slots(s, want); mem_known && need > mem)
    return "the job asks for " + std::to_string(need) + " MB of memory; " + mesh + std::to_string(mem) +
           " MB in all";
  return "";
}

std::string CoordinatorLoop::admit(const proto::mesh::Entry& e) const {
  if (const auto* a = std::get_if<proto::mesh::JobAccepted>(&e))
    if (std::string why = too_large(a->spec); !why.empty()) return why;
  return "";
}

bool CoordinatorLoop::whole_mesh_reports() const {
  if (!settled()) return false;
  const std::uint64_t now = env_.now_ms();
  for (const auto& [name, n] : nodes_) {
    if (removed(name)) continue;
    if (now - n.at_ms > kNodeStaleMs) return false;
    auto a = state_.data().nodes.find(name);
    if (a != state_.data().nodes.end() && a->second.state != proto::mesh::admin::kUp) return false;
  }
  return true;
}

void CoordinatorLoop::end_pending(std::uint64_t job, EndReason reason, const std::string& why) {
  const MeshJob* j = state_.job(job);
  if (!j || j->state != proto::state::kPending || proposing_.count(job)) return;
  proposing_.insert(job);
  proto::mesh::JobEnded e{job, 0, std::string(name(reason)), -1, env_.wall_s(), why};
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, job](const Proposed&) {
    if (!*alive) return;
    proposing_.erase(job);
    dirty_ = true;
  });
}

}  // namespace corral::service
