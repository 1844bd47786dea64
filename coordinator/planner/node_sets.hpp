// The free cores of each node grouped by count (NodeSets), and the choice of
// cores on a node: the placement rules both planner paths share, so the
// general and the fast path pick the same nodes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::planning {

// Nodes grouped by their free core count, one bitset per count. A cores-only
// start takes the best-fitting node (fewest free cores that hold the job),
// ties to the highest node index; a job no single node holds is spread over
// the nodes with the most free cores first, again highest index first. Being
// a set, the answer never depends on the order of earlier updates, so sets
// rebuilt in a pass and sets kept up to date across passes pick the same node.
struct NodeSets {
  std::size_t nw = 0;                    // words per bitset
  int maxc = 0;
  std::vector<std::uint64_t> bits;       // (maxc + 1) x nw
  std::vector<std::uint32_t> count;      // nodes per free count

  void init(std::size_t nodes, int max_free) {
    nw = (nodes + 63) / 64;
    maxc = std::max(0, max_free);
    bits.assign((static_cast<std::size_t>(maxc) + 1) * nw, 0);
    count.assign(static_cast<std::size_t>(maxc) + 1, 0);
  }
  void insert(std::uint32_t n, int c) {
    if (c <= 0 || c > maxc) return;
    bits[static_cast<std::size_t>(c) * nw + n / 64] |= std::uint64_t{1} << (n % 64);
    ++count[static_cast<std::size_t>(c)];
  }
  void erase(std::uint32_t n, int c) {
    if (c <= 0 || c > maxc) return;
    bits[static_cast<std::size_t>(c) * nw + n / 64] &= ~(std::uint64_t{1} << (n % 64));
    --count[static_cast<std::size_t>(c)];
  }
  // Highest node index below `below` with exactly c free; -1 if none.
  std::int64_t highest(int c, std::int64_t below) const {
    if (below <= 0) return -1;
    const std::uint64_t* w = bits.data() + static_cast<std::size_t>(c) * nw;
    std::size_t wi = static_cast<std::size_t>((below - 1) / 64);
    std::uint64_t m = w[wi];
    const unsigned top = static_cast<unsigned>((below - 1) % 64);
    if (top < 63) m &= (std::uint64_t{1} << (top + 1)) - 1;
    for (;;) {
      if (m) return static_cast<std::int64_t>(wi * 64 + 63 - static_cast<std::size_t>(__builtin_clzll(m)));
      if (wi == 0) return -1;
      m = w[--wi];
    }
  }
  // Length of the run of nodes with exactly c free at n, n - 1, ... (n has
  // c free), at most maxk: whole words at a time.
  std::int64_t run_down(int c, std::int64_t n, std::int64_t maxk) const {
    const std::uint64_t* w = bits.data() + static_cast<std::size_t>(c) * nw;
    std::int64_t k = 0;
    while (k < maxk && n >= 0) {
      const unsigned b = static_cast<unsigned>(n % 64);
      // Bit b moved to the top: the leading ones are the run (the bits
      // shifted in below are zeros, so it stops at bit 0 of the word).
      const std::uint64_t inv = ~(w[n / 64] << (63 - b));
      const std::int64_t ones = inv ? __builtin_clzll(inv) : 64;
      k += ones;
      n -= ones;
      if (ones < static_cast<std::int64_t>(b) + 1) break;
    }
    return std::min(k, maxk);
  }
  // Placement of s slots now (see above); the nodes' free counts are not
  // changed. ranges: consecutive nodes with the same slots make one entry
  // (Placement::count, PlannerConfig::node_ranges); the nodes and slots are
  // the same either way.
  std::vector<Placement> place(int s, std::size_t nodes, bool ranges = false) const {
    std::vector<Placement> out;
    // Single-core nodes: one entry per slot, reserved at once (no regrowth);
    // with ranges, room for a few.
    if (ranges) out.reserve(4);
    else if (maxc == 1)
      out.reserve(static_cast<std::size_t>(std::min<std::int64_t>(std::max(1, s), static_cast<std::int64_t>(nodes))));
    place_into(out, s, nodes, ranges);
    return out;
  }
  // The same, appended to `out` (PlannerConfig::compact_starts: one buffer
  // for every start of a pass).
  void place_into(std::vector<Placement>& out, int s, std::size_t nodes, bool ranges) const {
    const std::size_t first = out.size();
    const auto nn = static_cast<std::int64_t>(nodes);
    for (int c = std::max(1, s); c <= maxc; ++c)
      if (count[static_cast<std::size_t>(c)] > 0) {
        out.push_back({static_cast<std::uint32_t>(highest(c, nn)), static_cast<std::uint32_t>(s), {}});
        return;
      }
    // Nodes lo .. lo + k - 1 with `take` slots each (found highest first:
    // a run that ends right below the last entry's first node joins it).
    auto add = [&](std::int64_t lo, int take, std::int64_t k) {
      if (ranges && out.size() > first && out.back().node == lo + k && out.back().slots == static_cast<std::uint32_t>(take)) {
        out.back().node = static_cast<std::uint32_t>(lo);
        out.back().count += static_cast<std::uint32_t>(k);
        return;
      }
      out.push_back({static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(take), {}, static_cast<std::uint32_t>(k)});
    };
    int left = s;
    for (int c = std::min(maxc, s); c >= 1 && left > 0; --c)
      for (std::int64_t n = highest(c, nn); n >= 0 && left > 0;) {
        if (ranges && left >= c) {
          const std::int64_t k = run_down(c, n, left / c);
          add(n - k + 1, c, k);
          left -= static_cast<int>(k) * c;
          n = highest(c, n - k + 1);
          continue;
        }
        const int take = std::min(c, left);
        add(n, take, 1);
        left -= take;
        n = highest(c, n);
      }
  }
};

// Cores for s slots on a node (first free ones; with core_numa, preferably
// on the fullest NUMA node that holds them all). `used` counts holders per core.
std::vector<int> pick_cores(const Node& nd, std::uint16_t* used, int s);

}  // namespace corral::planning
