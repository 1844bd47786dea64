// Building and updating the cycle's model: nodes, the runs on them, the
// cores suspended jobs hold.
#include <algorithm>

#include "coordinator/nci/claim_order.hpp"
#include "coordinator/nci/cycle.hpp"

namespace corral::nci_detail {

void Cycle::occupy(std::uint32_t ri) {
  Run& r = runs[ri];
  for (const Placement& p : r.placement()) {
    if (p.node >= nodes.size()) continue;
    NodeState& n = nodes[p.node];
    n.idle -= static_cast<int>(p.slots);
    if (n.up) total_idle -= static_cast<int>(p.slots);
    if (p.cores.size() == p.slots) {
      for (int c : p.cores)
        if (c >= 0 && c < n.cores) {
          n.owner[c] = ri;
          n.claimed[c] = 0;
        }
    } else {
      n.cores_known = false;
    }
  }
  run_by_user[r.job->user]++;
  run_by_project[r.job->project]++;
}

void Cycle::release_cores(std::uint32_t ri) {
  Run& r = runs[ri];
  for (const Placement& p : r.placement()) {
    if (p.node >= nodes.size()) continue;
    NodeState& n = nodes[p.node];
    n.idle += static_cast<int>(p.slots);
    if (n.up) total_idle += static_cast<int>(p.slots);
    for (int c : p.cores)
      if (c >= 0 && c < n.cores && n.owner[c] == ri) n.owner[c] = kNone;
  }
  run_by_user[r.job->user]--;
  run_by_project[r.job->project]--;
}

void Cycle::hold_memory(const Run& r, int sign) {
  for (const Placement& p : r.placement())
    if (p.node < nodes.size()) hold_memory_on(r, p, sign);
}

void Cycle::mark_claimed(const Run& r) {
  for (const Placement& p : r.placement()) {
    if (p.node >= nodes.size()) continue;
    NodeState& n = nodes[p.node];
    for (int c : p.cores)
      if (c >= 0 && c < n.cores && n.owner[c] == kNone) n.claimed[c] = 1;
  }
}

void Cycle::mark_cores(std::vector<std::vector<std::uint8_t>>& m, const Run& r) const {
  for (const Placement& p : r.placement()) {
    if (p.node >= nodes.size()) continue;
    auto& row = m[p.node];
    if (row.empty()) row.assign(nodes[p.node].cores, 0);
    for (int c : p.cores)
      if (c >= 0 && c < nodes[p.node].cores) row[c] = 1;
  }
}

void Cycle::build() {
  queues = table_of(snap.queues, cfg);
  nodes.resize(snap.nodes.size());
  for (std::size_t i = 0; i < snap.nodes.size(); ++i) {
    const Node& sn = snap.nodes[i];
    NodeState& n = nodes[i];
    n.cores = std::max(sn.cores, 0);
    n.up = sn.up;
    n.idle = n.cores;
    n.track_mem = sn.mem_mb > 0;
    n.track_jobfs = sn.jobfs_mb > 0;
    n.mem_free = sn.mem_mb;
    n.jobfs_free = sn.jobfs_mb;
    n.owner.assign(n.cores, kNone);
    n.claimed.assign(n.cores, 0);
    if (n.up) {
      total_up_cores += n.cores;
      total_idle += n.cores;
    }
  }
}

void Cycle::add_running(const PassState& st) {
  std::unordered_set<JobId> freed(st.freed.begin(), st.freed.end());
  std::unordered_set<JobId> suspended_now;
  for (const Decision& d : plan.decisions)
    if (d.action == Action::Suspend) suspended_now.insert(d.job);
  runs.reserve(snap.running.size() + snap.pending.size());
  for (const RunningJob& rj : snap.running) {
    Run r;
    r.job = &rj.job;
    r.rj = &rj;
    r.pl = &rj.placement;
    r.cpus = held_cpus(rj);
    r.prio = prio_of(queue_name(rj.job, cfg));
    r.suspended = rj.suspended;
    r.projected_end = std::max(rj.expected_end, walltime_deadline(rj));
    if (freed.count(rj.job.id)) {
      // Freed by an earlier stage: a suspension keeps memory, a requeue not.
      if (suspended_now.count(rj.job.id)) {
        r.suspended = true;
        r.protect = true;  // do not resume what PBA just suspended
      } else {
        r.gone = true;
      }
    }
    runs.push_back(std::move(r));
    const std::uint32_t ri = static_cast<std::uint32_t>(runs.size() - 1);
    if (runs[ri].gone) continue;
    hold_memory(runs[ri], +1);
    if (!runs[ri].suspended) occupy(ri);
  }
  // A running job on cores a suspended job waits for (typically its
  // suspender) is never suspended in turn: suspensions do not stack, so a
  // suspended job resumes as soon as the jobs on its cores end.
  std::vector<std::vector<std::uint8_t>> waited(nodes.size());
  for (const Run& r : runs)
    if (r.suspended && !r.gone) mark_cores(waited, r);
  for (Run& r : runs) {
    if (r.suspended || r.gone) continue;
    for (const Placement& p : r.placement())
      if (p.node < nodes.size() && !waited[p.node].empty())
        for (int c : p.cores)
          if (c >= 0 && c < nodes[p.node].cores && waited[p.node][c]) r.shield = true;
    if (!r.protect && !r.shield) victim_cpus[r.prio] += r.cpus;
  }
  for (std::uint32_t ri = 0; ri < runs.size(); ++ri)
    if (runs[ri].suspended && !runs[ri].gone) mark_claimed(runs[ri]);
  if (!cfg.claim_suspended_cores) return;
  // A suspended job holds its free cores until it resumes (walk_claims: the
  // same cores nci_claims shows the planner as held). Runs 0.. are
  // snap.running's entries in order: their indices are the same.
  std::vector<std::size_t> susp;
  for (std::uint32_t ri = 0; ri < runs.size(); ++ri)
    if (runs[ri].suspended && !runs[ri].gone && !runs[ri].protect && runs[ri].rj) susp.push_back(ri);
  // Cores freed on entry (PBA's victims) go to the job they were freed for.
  auto& given = given_;
  given.assign(nodes.size(), {});
  for (const Run& r : runs)
    if ((r.gone || r.protect) && r.rj) mark_cores(given, r);
  walk_claims(snap, cfg, std::move(susp), [&](std::size_t i, const Placement& p, int c) {
    NodeState& n = nodes[p.node];
    if (n.owner[c] == kNone && n.idle > 0 && (given[p.node].empty() || !given[p.node][c])) {
      const auto ri = static_cast<std::uint32_t>(i);
      n.owner[c] = ri;
      --n.idle;
      --total_idle;
      runs[ri].held.push_back({p.node, c});
    }
  }, [](std::size_t) {});
}

void Cycle::free_held(std::uint32_t hn, int hc) {
  nodes[hn].owner[hc] = kNone;
  ++nodes[hn].idle;
  if (nodes[hn].up) ++total_idle;
}

void Cycle::unhold_all() {
  for (std::uint32_t ri = 0; ri < runs.size(); ++ri) {
    for (const auto& [hn, hc] : runs[ri].held)
      if (nodes[hn].owner[hc] == ri) free_held(hn, hc);
    runs[ri].held.clear();
  }
}

int Cycle::owner_running(const Job& j) const {
  auto get = [](const auto& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  };
  return std::max(get(run_by_user, j.user), get(run_by_project, j.project));
}

}  // namespace corral::nci_detail
