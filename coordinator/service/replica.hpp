// One member of a mesh as tests and benchmarks hold it: what survives a crash
// (its disk) and what does not (its state machine and raft instance), and
// which member leads, seen from outside.
#pragma once

#include <cstdint>
#include <memory>

#include "coordinator/service/mesh_machine.hpp"
#include "coordinator/service/raft_node.hpp"

namespace corral::service {

struct Replica {
  std::uint64_t id = 0;
  RaftDisk disk;
  std::unique_ptr<MeshMachine> fsm;
  std::unique_ptr<RaftNode> node;
  bool up() const { return node != nullptr; }
};

// Index of the live member that says it leads with the highest term, or -1.
template <class Replicas>
int leader_of(const Replicas& rs) {
  int best = -1;
  for (unsigned i = 0; i < rs.size(); ++i) {
    if (!rs[i].up() || !rs[i].node->is_leader()) continue;
    if (best < 0 || rs[i].node->term() > rs[best].node->term()) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace corral::service
