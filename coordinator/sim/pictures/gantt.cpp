#include "coordinator/sim/pictures/gantt.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <set>
#include <utility>
#include <vector>

namespace corral::sim {

std::string gantt_svg(const SimResult& r, Time from, Time to) {
  if (to <= from) to = from + 1;
  const int rows = std::max(1, r.machine_procs);
  const double W = 1200, H = std::min(2400.0, std::max(200.0, rows * 2.0)), left = 60, top = 30;
  const double rowh = H / rows, sx = W / static_cast<double>(to - from);
  std::string o;
  char b[512];
  std::snprintf(b, sizeof b,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#f4f4f4\" stroke=\"#888\"/>\n"
                "<text x=\"%.0f\" y=\"18\">t = %lld .. %lld s, %d processors</text>\n",
                W + left + 20, H + top + 40, left, top, W, H, left, static_cast<long long>(from),
                static_cast<long long>(to), rows);
  o += b;
  // Rows are assigned by first fit in start order (the same packing the
  // simulator's capacity check guarantees), so concurrent jobs never overlap.
  std::vector<std::size_t> order(r.segments.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b2) { return r.segments[a].start < r.segments[b2].start; });
  std::set<int> free_rows;
  for (int i = 0; i < rows; ++i) free_rows.insert(i);
  using End = std::pair<Time, std::size_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  std::vector<std::vector<int>> held(r.segments.size());
  for (std::size_t k : order) {
    const Segment& sg = r.segments[k];
    if (sg.start >= to) break;
    while (!ends.empty() && ends.top().first <= sg.start) {
      for (int row : held[ends.top().second]) free_rows.insert(row);
      held[ends.top().second].clear();
      ends.pop();
    }
    for (int i = 0; i < sg.slots && !free_rows.empty(); ++i) {
      held[k].push_back(*free_rows.begin());
      free_rows.erase(free_rows.begin());
    }
    ends.push({sg.end, k});
    if (sg.end <= from) continue;
    double x0 = left + static_cast<double>(std::max(sg.start, from) - from) * sx;
    double x1 = left + static_cast<double>(std::min(sg.end, to) - from) * sx;
    unsigned hue = static_cast<unsigned>((sg.id * 2654435761u) % 360u);
    // One rectangle per run of consecutive rows.
    const std::vector<int>& hr = held[k];
    for (std::size_t a = 0; a < hr.size();) {
      std::size_t z = a;
      while (z + 1 < hr.size() && hr[z + 1] == hr[z] + 1) ++z;
      std::snprintf(b, sizeof b,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"hsl(%u,60%%,60%%)\" "
                    "stroke=\"%s\" stroke-width=\"0.3\"><title>job %llu: %lld..%lld, %d procs%s</title></rect>\n",
                    x0, top + hr[a] * rowh, std::max(0.5, x1 - x0), (static_cast<double>(z - a + 1)) * rowh, hue,
                    sg.checkpointed ? "#c00" : "#333", static_cast<unsigned long long>(sg.id),
                    static_cast<long long>(sg.start), static_cast<long long>(sg.end), sg.slots,
                    sg.checkpointed ? " (checkpointed)" : "");
      o += b;
      a = z + 1;
    }
  }
  std::snprintf(b, sizeof b, "<text x=\"%.0f\" y=\"%.0f\">time (s)</text>\n</svg>\n", left + W / 2, H + top + 25);
  o += b;
  return o;
}

}  // namespace corral::sim
