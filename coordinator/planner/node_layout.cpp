// See node_layout.hpp.
#include "coordinator/planner/node_layout.hpp"

#include <algorithm>

namespace corral::planning {

void NodeLayout::build(const Snapshot& s) {
  const std::size_t n_nodes = s.nodes.size();
  built = true;
  version = s.nodes_version;
  nn = n_nodes;
  plain = true;
  total = 0;
  maxc = 0;
  cap.assign(nn, 0);
  cores.assign(nn, 0);
  up.assign(nn, 0);
  coff.assign(nn + 1, 0);
  std::uint32_t off = 0;
  for (std::size_t n = 0; n < nn; ++n) {
    const Node& nd = s.nodes[n];
    coff[n] = off;
    cores[n] = std::max(0, nd.cores);
    off += static_cast<std::uint32_t>(cores[n]);
    if (!nd.up) continue;
    up[n] = 1;
    cap[n] = cores[n];
    total += cap[n];
    maxc = std::max(maxc, nd.cores);
    if (nd.mem_mb > 0 || nd.jobfs_mb > 0 || !nd.consumables.empty()) plain = false;
  }
  coff[nn] = off;
}

}  // namespace corral::planning
