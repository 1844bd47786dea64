// NCI's scoring factors: equal-access shuffling of a queue, the expansion
// factor and the suspension score ("Queue shuffling", "Scoring factors").
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "coordinator/nci/nci.hpp"

namespace corral {

std::vector<double> equal_access_scores(const std::vector<const Job*>& pending,
                                        const std::vector<const RunningJob*>& running) {
  // Running jobs are "above" every queued one; sum their cpus per user and per
  // project, then walk the queue adding each job after scoring it. A job of the
  // same user AND project must be counted once: keep the pair sum too.
  std::unordered_map<std::string, double> by_user, by_project;
  std::map<std::pair<std::string, std::string>, double> by_both;
  auto add = [&](const Job& j, double cpus) {
    by_user[j.user] += cpus;
    by_project[j.project] += cpus;
    by_both[{j.user, j.project}] += cpus;
  };
  for (const RunningJob* r : running) add(r->job, held_cpus(*r));
  std::vector<double> out;
  out.reserve(pending.size());
  for (const Job* j : pending) {
    auto get = [](auto& m, const auto& k) {
      auto it = m.find(k);
      return it == m.end() ? 0.0 : it->second;
    };
    out.push_back(get(by_user, j->user) + get(by_project, j->project) -
                  get(by_both, std::make_pair(j->user, j->project)));
    add(*j, j->slots_min);
  }
  return out;
}

double expansion_factor(const RunningJob& victim, Time projected_suspend) {
  const double wall = static_cast<double>(std::max<Time>(victim.job.walltime, 1));
  return (wall + static_cast<double>(victim.suspended_for + std::max<Time>(projected_suspend, 0))) /
         wall;
}

int held_cpus(const RunningJob& rj) { return rj.slots > 0 ? rj.slots : rj.job.slots_min; }

Time walltime_deadline(const RunningJob& rj) {
  return rj.start + rj.job.walltime + rj.suspended_for;
}

double suspension_score(const Job& s, const RunningJob& v, Time now, int s_running, int v_running,
                        const NciConfig& cfg) {
  const SuspendWeights& w = cfg.weights;
  // 1. expansion factor of the victim if suspended for the suspender's walltime.
  const double xf = expansion_factor(v, s.walltime);
  const double span = std::max(cfg.xfactor_limit - 1.0, 1e-6);
  const double fx = (xf - 1.0) / span;
  double score = -w.xfactor * fx * fx;
  // 2. larger jobs have priority over smaller ones.
  const int vc = std::max(held_cpus(v), 1);
  score += w.cpus * std::log2(static_cast<double>(std::max(s.slots_min, 1)) / vc);
  // 3. owners' running jobs; no effect unless the counts differ a lot.
  const double r = std::log2((1.0 + v_running) / (1.0 + s_running));
  score += w.running * (r > 0 ? std::max(0.0, r - 1.0) : std::min(0.0, r + 1.0));
  // 4. fraction done: jobs close to their walltime are kept running.
  const double ran = static_cast<double>(std::max<Time>(now - v.start - v.suspended_for, 0));
  const double done = std::clamp(ran / std::max<double>(static_cast<double>(v.job.walltime), 1.0), 0.0, 1.0);
  score -= w.done * done * done;
  // Start window: the suspender's own expansion factor while it waits
  // ("the expansion factor of jobs starting late ... is modified").
  const double swall = static_cast<double>(std::max<Time>(s.walltime, 1));
  const double pxf = (swall + static_cast<double>(std::max<Time>(now - s.submit, 0))) / swall;
  score += w.wait * (pxf - 1.0);
  return score;
}

}  // namespace corral
