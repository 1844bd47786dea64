// The nodes as the planner's fast path reads them: capacities, up flags and
// core offsets, kept across passes while Snapshot::nodes_version says the
// nodes are unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::planning {

struct NodeLayout {
  std::uint64_t version = 0;      // Snapshot::nodes_version it was built from
  bool built = false;
  bool plain = false;             // no node tracks memory, jobfs or consumables
  std::size_t nn = 0;
  std::int64_t total = 0;         // cores of up nodes
  int maxc = 0;
  std::vector<int> cap;           // schedulable cores (0 if down)
  std::vector<int> cores;         // Node::cores (core index bound)
  std::vector<std::uint8_t> up;
  std::vector<std::uint32_t> coff;

  // Whether the layout must be rebuilt for snapshot s.
  bool stale(const Snapshot& s) const {
    return !built || s.nodes_version == 0 || s.nodes_version != version || s.nodes.size() != nn;
  }
  void build(const Snapshot& s);
};

}  // namespace corral::planning
