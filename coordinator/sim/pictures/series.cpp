#include "coordinator/sim/pictures/series.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace corral::sim {

namespace {

using Steps = std::vector<std::pair<Time, double>>;  // (when, change of the value)

// The time-weighted mean of a step function in each of n bins from t0.
std::vector<double> bin_means(Steps& ev, Time t0, Time bin, int n) {
  std::sort(ev.begin(), ev.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> out(static_cast<std::size_t>(n), 0.0);
  const Time end = t0 + bin * n;
  auto add = [&](Time a, Time b, double v) {  // v over [a, b)
    a = std::max(a, t0);
    b = std::min(b, end);
    while (a < b) {
      const Time i = (a - t0) / bin, e = std::min(b, t0 + (i + 1) * bin);
      out[static_cast<std::size_t>(i)] += v * static_cast<double>(e - a);
      a = e;
    }
  };
  double cur = 0;
  Time t = t0;
  for (const auto& [when, dv] : ev) {
    if (when > t) {
      add(t, when, cur);
      t = when;
    }
    cur += dv;
  }
  add(t, end, cur);
  for (double& v : out) v /= static_cast<double>(bin);
  return out;
}

}  // namespace

Series series_of(const SimResult& r, int bins) {
  Series s;
  s.procs = r.machine_procs;
  if (r.per_job.empty() || bins < 1) return s;
  const Time t0 = r.per_job.front().submit;
  Time t1 = t0 + r.makespan;
  for (const JobResult& j : r.per_job) t1 = std::max(t1, j.submit);
  for (const Segment& g : r.segments) t1 = std::max(t1, g.end);
  s.origin = t0;
  s.bin = std::max<Time>(1, (t1 - t0 + bins - 1) / bins);
  bins = static_cast<int>(std::max<Time>(1, (t1 - t0 + s.bin - 1) / s.bin));  // the last bin holds t1

  std::unordered_map<JobId, std::size_t> index;
  for (std::size_t i = 0; i < r.per_job.size(); ++i) index.emplace(r.per_job[i].id, i);
  std::vector<std::vector<const Segment*>> runs(r.per_job.size());
  Steps busy, queued, queued_ph;
  for (const Segment& g : r.segments) {
    busy.emplace_back(g.start, g.slots);
    busy.emplace_back(g.end, -g.slots);
    if (auto it = index.find(g.id); it != index.end()) runs[it->second].push_back(&g);
  }
  auto wait = [&](const JobResult& j, Time a, Time b) {
    if (b <= a) return;
    const double ph = static_cast<double>(j.procs) * static_cast<double>(j.estimate) / 3600.0;
    queued.emplace_back(a, 1);
    queued.emplace_back(b, -1);
    queued_ph.emplace_back(a, ph);
    queued_ph.emplace_back(b, -ph);
  };
  for (std::size_t i = 0; i < r.per_job.size(); ++i) {
    const JobResult& j = r.per_job[i];
    if (j.rejected) continue;
    auto& rs = runs[i];
    std::sort(rs.begin(), rs.end(), [](const Segment* a, const Segment* b) { return a->start < b->start; });
    Time from = j.submit;  // -1: not waiting (running or suspended)
    for (const Segment* g : rs) {
      if (from >= 0) wait(j, from, g->start);
      from = g->checkpointed || g->requeued ? g->end : -1;
    }
    if (from >= 0 && j.end < 0) wait(j, from, t1);
  }
  s.busy = bin_means(busy, t0, s.bin, bins);
  s.queued = bin_means(queued, t0, s.bin, bins);
  s.queued_ph = bin_means(queued_ph, t0, s.bin, bins);
  return s;
}

}  // namespace corral::sim
