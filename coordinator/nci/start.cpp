// Starting a job in the cycle: placing it on idle cpus or on the cores of
// victims it may suspend (priority-run, parallel-run, start window).
#include <algorithm>
#include <cstdio>

#include "coordinator/nci/claim_order.hpp"
#include "coordinator/nci/cycle.hpp"

namespace corral::nci_detail {

int Cycle::capacity(const NodeState& n, int extra, int c, const Job& j) const {
  if (!n.up) return 0;
  std::int64_t k = n.idle + extra;
  if (n.track_mem && j.mem_mb > 0)
    k = std::min<std::int64_t>(k, n.mem_free > 0 ? n.mem_free * c / j.mem_mb : 0);
  if (n.track_jobfs && j.jobfs_mb > 0)
    k = std::min<std::int64_t>(k, n.jobfs_free > 0 ? n.jobfs_free * c / j.jobfs_mb : 0);
  return static_cast<int>(std::clamp<std::int64_t>(k, 0, c));
}

bool Cycle::place(const Job& j, int c, const std::unordered_map<std::uint32_t, int>& extra,
           const std::unordered_set<std::uint32_t>& victims, std::vector<Placement>& out) {
  struct Cand {
    std::uint32_t node;
    int cap;
    int freed;
  };
  std::vector<Cand> cands;
  int total = 0;
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    auto it = extra.find(i);
    const int ex = it == extra.end() ? 0 : it->second;
    const int cap = capacity(nodes[i], ex, c, j);
    if (cap > 0) {
      cands.push_back({i, cap, ex});
      total += cap;
    }
  }
  if (total < c) return false;
  // One node if possible (best fit, victims' nodes first); else the largest
  // capacities first (fewest nodes), victims' nodes first.
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
    if ((a.freed > 0) != (b.freed > 0)) return a.freed > 0;
    if (a.cap != b.cap) return a.cap > b.cap;
    return a.node < b.node;
  });
  const Cand* single = nullptr;
  for (const Cand& k : cands)
    if (k.cap >= c && (!single || (k.freed > 0) > (single->freed > 0) ||
                       ((k.freed > 0) == (single->freed > 0) && k.cap < single->cap)))
      single = &k;
  std::vector<std::pair<std::uint32_t, int>> take;
  if (single) {
    take.push_back({single->node, c});
  } else {
    int left = c;
    for (const Cand& k : cands) {
      if (left == 0) break;
      const int t = std::min(left, k.cap);
      take.push_back({k.node, t});
      left -= t;
    }
  }
  out.clear();
  for (auto [ni, k] : take) {
    NodeState& n = nodes[ni];
    Placement p;
    p.node = ni;
    p.slots = static_cast<std::uint32_t>(k);
    if (n.cores_known) {
      // Victims' cores first, then unclaimed free cores, then cores a
      // suspended job will want back.
      std::vector<int> order;
      for (int pass = 0; pass < 3 && static_cast<int>(order.size()) < k; ++pass)
        for (int ci = 0; ci < n.cores && static_cast<int>(order.size()) < k; ++ci) {
          const std::uint32_t o = n.owner[ci];
          const bool victim = o != kNone && victims.count(o);
          if (pass == 0 ? victim : pass == 1 ? (o == kNone && !n.claimed[ci])
                                             : (o == kNone && n.claimed[ci]))
            order.push_back(ci);
        }
      if (static_cast<int>(order.size()) == k) p.cores = std::move(order);
    }
    out.push_back(std::move(p));
  }
  return true;
}

bool Cycle::eligible_victim(const Run& v, const Job& s, int sprio, int c, Mode mode, double score,
                     double xf) const {
  if (v.gone || v.suspended || v.protect || !v.rj) return false;
  switch (mode) {
    case Mode::Priority:
      return v.prio < sprio;
    case Mode::Parallel:
      return v.prio <= sprio && v.cpus < c && score >= cfg.parallel_min_score &&
             xf <= cfg.xfactor_limit;
    case Mode::Window:
    case Mode::Overdue:
      return true;
  }
  (void)s;
  return false;
}

bool Cycle::reversible(const Run& v, int sprio, int c, Mode mode) const {
  return cfg.reverse_starts && mode == Mode::Parallel && v.tentative && !v.keep && !v.gone &&
         v.prio <= sprio && v.cpus < c;
}

bool Cycle::try_start(const Job& j, std::uint32_t li, int sprio, Mode mode, const char* why, bool with_victims) {
  const int cmin = std::max(j.slots_min, 1);
  const int cmax = std::max(j.slots_max, cmin);
  std::vector<Placement> pl;
  static const std::unordered_map<std::uint32_t, int> kNoExtra;
  static const std::unordered_set<std::uint32_t> kNoVictims;
  if (!with_victims) {
    if (total_idle < cmin) return false;
    // Largest slot count of the range that fits now (PE ranges).
    for (int c : {cmax, cmin}) {
      if (c > total_idle) continue;
      if (place(j, c, kNoExtra, kNoVictims, pl)) {
        commit_start(j, li, c, std::move(pl), {}, why, mode);
        return true;
      }
    }
    return false;
  }
  const int c = cmin;
  // Candidate victims, most favoured first: reversible tentative starts
  // (nothing is suspended for them), then those whose expansion factor
  // stays below the limit, then by suspension score.
  struct Cand {
    std::uint32_t ri;
    double score;
    double xf;
  };
  std::vector<Cand> cands;
  long long quick = total_idle;
  for (const auto& [pr, n] : victim_cpus)
    if (mode == Mode::Window || (mode == Mode::Priority ? pr < sprio : pr <= sprio)) quick += n;
  if (mode == Mode::Parallel) quick += tentative_cpus;
  if (mode != Mode::Overdue && quick < c) return false;  // shielded jobs are not counted there
  int reach = total_idle;
  const int srun = owner_running(j);
  for (std::uint32_t ri = 0; ri < runs.size(); ++ri) {
    const Run& v = runs[ri];
    if (reversible(v, sprio, c, mode)) {
      cands.push_back({ri, std::numeric_limits<double>::infinity(), 1.0});
      reach += v.cpus;
      continue;
    }
    if (v.gone || v.suspended || v.protect || !v.rj) continue;
    // Suspensions do not stack, except for an overdue window job.
    if (v.shield && mode != Mode::Overdue) continue;
    if (mode == Mode::Priority && v.prio >= sprio) continue;
    // A window start keeps its quantum against later window jobs.
    if (mode == Mode::Window && window_protected(*v.rj, snap.now, cfg)) continue;
    const double xf = expansion_factor(*v.rj, j.walltime);
    const double sc = suspension_score(j, *v.rj, snap.now, srun, owner_running(*v.job), cfg);
    if (!eligible_victim(v, j, sprio, c, mode, sc, xf)) continue;
    cands.push_back({ri, sc, xf});
    reach += v.cpus;
  }
  if (reach < c || cands.empty()) return false;
  auto worse = [&](const Cand& a, const Cand& b) {
    const bool ao = a.xf <= cfg.xfactor_limit, bo = b.xf <= cfg.xfactor_limit;
    if (ao != bo) return bo;
    if (a.score != b.score) return a.score < b.score;
    return runs[a.ri].job->id > runs[b.ri].job->id;
  };
  // A heap: only the few victims actually needed get ordered.
  std::make_heap(cands.begin(), cands.end(), worse);
  // Add victims until the job fits (running total of per-node capacity).
  std::unordered_map<std::uint32_t, int> extra;
  std::vector<int> cap(nodes.size());
  long long total = 0;
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    cap[i] = capacity(nodes[i], 0, c, j);
    total += cap[i];
  }
  auto apply = [&](std::uint32_t ri, int sign) {
    const Run& v = runs[ri];
    for (const Placement& p : v.placement()) {
      if (p.node >= nodes.size()) continue;
      int& ex = extra[p.node];
      ex += sign * static_cast<int>(p.slots);
      // A reversed start gives its memory back too; a suspended job keeps it.
      if (v.tentative) hold_memory_on(v, p, -sign);
      total -= cap[p.node];
      cap[p.node] = capacity(nodes[p.node], ex, c, j);
      total += cap[p.node];
    }
  };
  std::vector<Cand> picked;
  std::vector<std::size_t> chosen;
  while (!cands.empty() && total < c) {
    std::pop_heap(cands.begin(), cands.end(), worse);
    picked.push_back(cands.back());
    cands.pop_back();
    apply(picked.back().ri, +1);
    chosen.push_back(picked.size() - 1);
  }
  auto undo_all = [&] {
    for (std::size_t k : chosen) apply(picked[k].ri, -1);
  };
  if (total < c) {
    undo_all();
    return false;
  }
  // Drop victims that turn out unnecessary, least favoured first.
  for (std::size_t i = chosen.size(); i-- > 0;) {
    apply(picked[chosen[i]].ri, -1);
    if (total >= c) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      apply(picked[chosen[i]].ri, +1);
    }
  }
  std::unordered_set<std::uint32_t> victims;
  for (std::size_t k : chosen) victims.insert(picked[k].ri);
  for (auto it = extra.begin(); it != extra.end();)
    it = it->second == 0 ? extra.erase(it) : std::next(it);
  const bool ok = place(j, c, extra, victims, pl);
  undo_all();  // commit_start applies the real changes
  if (!ok) return false;
  std::vector<std::pair<std::uint32_t, std::pair<double, double>>> vs;
  for (std::size_t k : chosen) vs.push_back({picked[k].ri, {picked[k].score, picked[k].xf}});
  commit_start(j, li, c, std::move(pl), vs, why, mode);
  return true;
}

void Cycle::commit_start(const Job& j, std::uint32_t li, int c, std::vector<Placement> pl,
                  const std::vector<std::pair<std::uint32_t, std::pair<double, double>>>& victims,
                  const char* why, Mode mode) {
  bool reversed_any = false;
  for (const auto& [ri, sx] : victims) {
    Run& v = runs[ri];
    if (v.tentative) {
      // "that decision may be reversed later in that cycle": the smaller
      // job goes back to the queue, nothing is suspended.
      release_cores(ri);
      hold_memory(v, -1);
      tentative_cpus -= v.cpus;
      v.gone = true;
      v.tentative = false;
      started[v.live] = 0;
      reversed.push_back(v.live);
      reversed_any = true;
      continue;
    }
    release_cores(ri);
    if (!v.shield) victim_cpus[v.prio] -= v.cpus;
    v.suspended = true;
    mark_claimed(v);
    char buf[160];
    std::snprintf(buf, sizeof buf, "suspended for job %llu (%s, XFactor %.2f, score %.2f)",
                  static_cast<unsigned long long>(j.id),
                  mode == Mode::Priority ? "priority-run"
                  : mode == Mode::Parallel ? "parallel-run"
                  : mode == Mode::Window   ? "start window"
                                           : "start window overdue",
                  sx.second, sx.first);
    decide(Action::Suspend, v, buf);
    suspended_ids.push_back(v.job->id);
  }
  if (reversed_any)  // a reversed start may have sat on a suspended job's cores
    for (const Run& r : runs)
      if (r.suspended && !r.gone) mark_claimed(r);
  Run r;
  r.job = &j;
  r.own = std::move(pl);
  r.cpus = c;
  r.prio = prio_of(queue_name(j, cfg));
  r.protect = true;
  r.live = li;
  r.projected_end = snap.now + j.walltime;
  // A start that needed victims is decided for this pass; an idle-cpu start
  // is tentative (a larger job further down may still reverse it).
  r.tentative = victims.empty();
  r.keep = !r.tentative || (li < keep_live.size() && keep_live[li]);
  runs.push_back(std::move(r));
  const auto ri = static_cast<std::uint32_t>(runs.size() - 1);
  hold_memory(runs[ri], +1);
  occupy(ri);
  if (runs[ri].tentative && !runs[ri].keep) tentative_cpus += c;
  if (li < started.size()) started[li] = victims.empty() ? 1 : 2;
  (void)why;
}

}  // namespace corral::nci_detail
