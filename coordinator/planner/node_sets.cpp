// Placement on cores: see node_sets.hpp.
#include "coordinator/planner/node_sets.hpp"

#include <map>
#include <utility>

namespace corral::planning {

std::vector<int> pick_cores(const Node& nd, std::uint16_t* used, int s) {
  std::vector<int> out;
  const int C = nd.cores;
  auto take_from = [&](int numa) {
    for (int c = 0; c < C && static_cast<int>(out.size()) < s; ++c)
      if (!used[c] && (numa < 0 || nd.core_numa[static_cast<std::size_t>(c)] == numa)) {
        ++used[c];
        out.push_back(c);
      }
  };
  if (static_cast<int>(nd.core_numa.size()) == C && C > 0) {
    std::map<int, int> freec;
    for (int c = 0; c < C; ++c)
      if (!used[c]) ++freec[nd.core_numa[static_cast<std::size_t>(c)]];
    int best = -1, bestf = 0;
    for (const auto& [d, f] : freec)
      if (f >= s && (best < 0 || f < bestf)) {
        best = d;
        bestf = f;
      }
    if (best >= 0) {
      take_from(best);
    } else {
      std::vector<std::pair<int, int>> order;
      for (const auto& [d, f] : freec) order.emplace_back(-f, d);
      std::sort(order.begin(), order.end());
      for (const auto& [f, d] : order) take_from(d);
    }
  }
  take_from(-1);
  return out;
}

}  // namespace corral::planning
