// Priority-based allocation (pba-synopsys-patent.txt). See pba.hpp.
#include "coordinator/pba/pba.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <unordered_set>

namespace corral {
namespace pba {

bool covers(const Allocation& a, const Job& job) {
  return a.project == job.project && (a.user.empty() || a.user == job.user) &&
         (a.group.empty() || a.group == job.group) && (a.step.empty() || a.step == job.flow_step);
}

namespace {
// `slots_now`: the project's allocated slots this week, if the caller has them.
Verdict qualify(const Job& job, const ProjectPlan& plan, Time now, bool require_tag,
                const std::map<std::string, int>* slots_now) {
  // Patent: "verify if a pre-defined Project tag has been set ... 1) valid
  // project name 2) user a valid member 3) job slots allocated for the project".
  if (job.project.empty()) {
    if (!require_tag) return {};
    return {Qualify::NoProjectTag, "job has no project tag"};
  }
  const ProjectDef* p = plan.project(job.project);
  if (!p) return {Qualify::UnknownProject, "project '" + job.project + "' is not a valid project"};
  const bool member = p->users.count(job.user) || (!job.group.empty() && p->groups.count(job.group));
  if (!member)
    return {Qualify::NotMember, "user '" + job.user + "'" +
                                    (job.group.empty() ? std::string() : " (group '" + job.group + "')") +
                                    " is not a member of project '" + job.project + "'"};
  int slots = 0;
  if (slots_now) {
    const auto it = slots_now->find(job.project);
    slots = it == slots_now->end() ? 0 : it->second;
  } else {
    slots = plan.allocated_slots(job.project, now);
  }
  if (slots <= 0)
    return {Qualify::NoAllocation, "project '" + job.project + "' has no job slots allocated for " +
                                       format_iso_week(iso_week(now))};
  return {};
}
}  // namespace

Verdict prequalify(const Job& job, const ProjectPlan& plan, Time now, bool require_tag) {
  return qualify(job, plan, now, require_tag, nullptr);
}

void apply_update(Job& job, const JobUpdate& u) {
  job.priority = u.priority;
  job.cycles_pending = u.cycles_pending;
}

void on_start(Job& job, Time now) {
  job.last_start_priority = job.priority;
  if (job.first_start < 0) job.first_start = now;
}

void on_requeue(Job& job) {
  job.requeues += 1;
  job.cycles_pending = 0;
}

void on_pba_preemption(Job& job) { job.pba_preemptions += 1; }

double next_priority(const Job& job, bool allocated, const PbaConfig& cfg) {
  double p;
  if (job.cycles_pending == 0) {
    // Entering the queue: fresh jobs get the default; a requeued job gets the
    // priority it was started with plus the requeue increment (22 -> 32).
    const bool started_before = job.requeues > 0 || job.first_start >= 0 || job.last_start_priority > 0;
    p = started_before ? std::max(job.priority, job.last_start_priority + cfg.requeue_increment)
                       : cfg.default_priority;
  } else {
    p = job.priority;
  }
  // One cron cycle: an allocated job not yet tagged gets the PBA increment
  // (20 -> 120), every other pending job +1 (120 -> 121 -> 122, 20 -> 21 -> 22).
  const bool tagged = p >= cfg.default_priority + cfg.allocation_increment;
  p += (allocated && !tagged) ? cfg.allocation_increment : cfg.cycle_increment;
  return p;
}

// ----------------------------------------------------------------- report --

std::vector<ProjectStatus> project_status(const Snapshot& snap, const ProjectPlan& plan) {
  std::vector<ProjectStatus> rows;
  std::map<std::string, std::size_t> at;
  auto row = [&](const std::string& name) -> ProjectStatus& {
    auto it = at.find(name);
    if (it != at.end()) return rows[it->second];
    at[name] = rows.size();
    rows.push_back(ProjectStatus{name, plan.allocated_slots(name, snap.now), 0, 0, 0});
    return rows.back();
  };
  for (const auto& p : plan.projects) row(p.name);
  for (const auto& r : snap.running) {
    ProjectStatus& s = row(r.job.project);
    if (r.suspended) ++s.suspended;
    else s.running += r.slots > 0 ? r.slots : r.job.slots_min;
  }
  for (const auto& j : snap.pending) ++row(j.project).pending;
  return rows;
}

std::string format_status(const std::vector<ProjectStatus>& rows, Time now) {
  char buf[160];
  std::string out = "PBA " + format_iso_week(iso_week(now)) + "\n";
  std::snprintf(buf, sizeof buf, "%-20s %9s %8s %8s %9s %8s\n", "project", "allocated", "running", "pending",
                "suspended", "over");
  out += buf;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-20s %9d %8d %8d %9d %+8d\n",
                  r.project.empty() ? "(no project)" : r.project.c_str(), r.allocated, r.running, r.pending,
                  r.suspended, r.oversubscribed());
    out += buf;
  }
  return out;
}

// ------------------------------------------------------ placeholder slots --

std::int64_t standard_share_mb(const Node& node) {
  if (node.mem_mb <= 0 || node.cores <= 0) return 0;
  return node.mem_mb / node.cores;
}

int placeholders_for(const Node& node, int slots, std::int64_t mem_mb) {
  const std::int64_t share = standard_share_mb(node);
  if (share <= 0 || slots <= 0 || mem_mb <= share * slots) return 0;
  const std::int64_t need = (mem_mb + share - 1) / share;  // slots' worth of memory
  return static_cast<int>(std::min<std::int64_t>(need - slots, node.cores));
}

bool is_light(const Node& node, int slots, std::int64_t mem_mb) {
  const std::int64_t share = standard_share_mb(node);
  // A job that claims no memory cannot make the host thrash: light. (This
  // also keeps core-only jobs on the planner's fast path.)
  return share > 0 && mem_mb < share * slots;
}

std::int64_t mem_on_node(const Job& job, int total_slots, int slots_here) {
  if (total_slots <= 0) return job.mem_mb;
  return job.mem_mb * slots_here / total_slots;
}

void add_placement(const Node& node, NodeLoad& load, int slots, std::int64_t mem_mb) {
  if (is_light(node, slots, mem_mb)) {
    load.light += slots;
  } else {
    load.heavy_or_standard += slots;
    load.placeholders += placeholders_for(node, slots, mem_mb);
  }
}

bool may_place(const Node& node, const NodeLoad& load, int slots, std::int64_t mem_mb) {
  if (!node.up || slots <= 0) return false;
  // Light jobs fill placeholder slots first, so the real slots in use are the
  // heavy/standard ones plus whichever is larger: placeholders or light jobs.
  if (is_light(node, slots, mem_mb))
    return load.heavy_or_standard + std::max(load.placeholders, load.light + slots) <= node.cores;
  const int used = load.heavy_or_standard + std::max(load.placeholders, load.light);
  return used + slots + placeholders_for(node, slots, mem_mb) <= node.cores;
}

bool may_place_now(const Snapshot& snap, const PassState& st, const Plan& plan, const Job& job,
                   std::uint32_t node, int slots) {
  if (node >= snap.nodes.size()) return false;
  const Node& n = snap.nodes[node];
  if (standard_share_mb(n) <= 0) return n.up;  // memory not tracked: no placeholders
  NodeLoad load;
  for (const auto& r : snap.running) {
    if (std::find(st.freed.begin(), st.freed.end(), r.job.id) != st.freed.end()) continue;
    int total = 0;
    for (const auto& pl : r.placement) total += static_cast<int>(pl.slots);
    for (const auto& pl : r.placement) {
      if (pl.node != node) continue;
      const int s = static_cast<int>(pl.slots);
      const std::int64_t mem = mem_on_node(r.job, total, s);
      if (!r.suspended) add_placement(n, load, s, mem);
      else if (!is_light(n, s, mem)) load.placeholders += placeholders_for(n, s, mem);
    }
  }
  for (const auto& d : plan.decisions) {
    if (d.action != Action::Start) continue;
    const Job* sj = nullptr;
    for (const auto& p : snap.pending)
      if (p.id == d.job) { sj = &p; break; }
    if (!sj) continue;
    int total = 0;
    for (const auto& pl : d.placement) total += static_cast<int>(pl.slots);
    for (const auto& pl : d.placement)
      if (pl.node == node)
        add_placement(n, load, static_cast<int>(pl.slots), mem_on_node(*sj, total, static_cast<int>(pl.slots)));
  }
  const int total = std::max(slots, job.slots_min);
  return may_place(n, load, slots, mem_on_node(job, total, slots));
}

std::vector<NodeLoad> node_loads(const Snapshot& snap, const std::vector<JobId>& freed) {
  std::vector<NodeLoad> loads(snap.nodes.size());
  const std::unordered_set<JobId> gone(freed.begin(), freed.end());
  for (const auto& r : snap.running) {
    if (gone.count(r.job.id)) continue;
    int total = 0;
    for (const auto& pl : r.placement) total += static_cast<int>(pl.slots);
    for (const auto& pl : r.placement) {
      if (pl.node >= snap.nodes.size()) continue;
      const Node& n = snap.nodes[pl.node];
      const int s = static_cast<int>(pl.slots);
      const std::int64_t mem = mem_on_node(r.job, total, s);
      if (r.suspended) {
        // Cores released, memory still held: keep the placeholders only.
        if (!is_light(n, s, mem)) loads[pl.node].placeholders += placeholders_for(n, s, mem);
      } else {
        add_placement(n, loads[pl.node], s, mem);
      }
    }
  }
  return loads;
}

}  // namespace pba

// ----------------------------------------------------------------- stage --

namespace {

using pba::Allocation;
using pba::JobClass;

struct Bucket {
  const Allocation* a = nullptr;
  int used = 0;  // slots held by running jobs counted against this allocation
};

// Buckets that may count this job, most specific first.
std::vector<Bucket*> matching(std::vector<Bucket>& buckets, const Job& j) {
  std::vector<Bucket*> out;
  for (auto& b : buckets)
    if (pba::covers(*b.a, j)) out.push_back(&b);
  return out;
}

int job_slots(const RunningJob& r) {
  if (r.slots > 0) return r.slots;
  int s = 0;
  for (const auto& p : r.placement) s += static_cast<int>(p.slots);
  return s > 0 ? s : r.job.slots_min;
}

Time est_of(const Job& j) {
  if (j.estimate > 0) return j.estimate;
  if (j.walltime > 0) return j.walltime;
  return 3600;  // nothing known: an hour
}

// Service levels: how many slots each SLA project should hold in parallel
// (its cap this pass), how urgent it is (0..1), and whether it may preempt
// without waiting out the pending threshold.
struct SlaState {
  int cap = std::numeric_limits<int>::max();
  double pressure = 0;
  bool waive_wait = false;
};

// One run of the stage: what its steps (in pba_stage's order) share.
struct PbaPass {
  PbaPass(const Snapshot& s, const PbaConfig& c, PassState& p, Plan& pl)
      : snap(s), cfg(c), st(p), plan(pl), now(s.now), pplan(c.plan), freed0(p.freed.begin(), p.freed.end()) {}

  const Snapshot& snap;
  const PbaConfig& cfg;
  PassState& st;
  Plan& plan;
  const Time now;
  const pba::ProjectPlan& pplan;
  const std::unordered_set<JobId> freed0;  // freed by an earlier stage

  std::vector<Bucket> buckets;
  std::map<std::string, int> project_alloc;
  std::vector<std::size_t> run_idx;  // running, not suspended nor freed, oldest first
  std::vector<char> is_protected;
  std::map<std::string, int> project_running;  // slots
  std::map<std::string, int> project_pba_used;
  int busy = 0;
  int free_slots = 0;
  std::map<std::string, int> project_pending;
  std::map<std::string, SlaState> sla;
  // Per pending job.
  std::vector<JobClass> cls;
  std::vector<double> eff;
  std::vector<char> allocated;

  void make_buckets();
  void count_running();
  void count_free();
  void set_service_levels();
  void classify_pending();
  void admit_allocated();
  void reorder();
  void resume_suspended();
  std::vector<std::size_t> rank_victims();
  void preempt();
};

// Allocation buckets for this ISO week, most specific first (a user's or a
// step's slots are used before the project's general ones).
void PbaPass::make_buckets() {
  for (const Allocation* a : pplan.allocations_at(now)) buckets.push_back({a, 0});
  std::stable_sort(buckets.begin(), buckets.end(), [](const Bucket& x, const Bucket& y) {
    return x.a->specificity() > y.a->specificity();
  });
  for (const auto& b : buckets) project_alloc[b.a->project] += b.a->slots;
}

// Running jobs, oldest first, are counted against the allocations; those
// that fit are PBA jobs (never preempted by PBA), the rest are normal.
void PbaPass::count_running() {
  for (std::size_t i = 0; i < snap.running.size(); ++i)
    if (!snap.running[i].suspended && !freed0.count(snap.running[i].job.id)) run_idx.push_back(i);
  std::stable_sort(run_idx.begin(), run_idx.end(), [&](std::size_t x, std::size_t y) {
    const auto& a = snap.running[x];
    const auto& b = snap.running[y];
    return a.start != b.start ? a.start < b.start : a.job.id < b.job.id;
  });
  is_protected.assign(snap.running.size(), 0);
  for (std::size_t i : run_idx) {
    const auto& r = snap.running[i];
    const int s = job_slots(r);
    busy += s;
    project_running[r.job.project] += s;
    // Only qualified jobs (members of a valid project) hold allocated slots.
    if (r.job.project.empty() || !pba::qualify(r.job, pplan, now, true, &project_alloc).ok()) continue;
    for (Bucket* b : matching(buckets, r.job)) {
      if (b->used + s <= b->a->slots) {
        b->used += s;
        project_pba_used[r.job.project] += s;
        is_protected[i] = 1;
        break;
      }
    }
  }
}

// The free slots of the up nodes, and the pending jobs per project.
void PbaPass::count_free() {
  int cores = 0;
  for (const auto& n : snap.nodes)
    if (n.up) cores += n.cores;
  if (cfg.suspended_hold_cores) {
    // The free cores of a suspended job wait for its resume (NCI's
    // nci_claims): they are not free for allocated jobs either.
    std::vector<std::vector<std::uint8_t>> used(snap.nodes.size());
    auto mark = [&](const RunningJob& r, bool count) {
      for (const auto& pl : r.placement) {
        if (pl.node >= snap.nodes.size() || !snap.nodes[pl.node].up) continue;
        auto& u = used[pl.node];
        if (u.empty()) u.assign(static_cast<std::size_t>(std::max(snap.nodes[pl.node].cores, 0)), 0);
        for (int c : pl.cores)
          if (c >= 0 && static_cast<std::size_t>(c) < u.size() && !u[static_cast<std::size_t>(c)]) {
            u[static_cast<std::size_t>(c)] = 1;
            if (count) ++busy;
          }
      }
    };
    for (std::size_t i : run_idx) mark(snap.running[i], false);
    for (const auto& r : snap.running)
      if (r.suspended && !freed0.count(r.job.id)) mark(r, true);
  }
  free_slots = std::max(0, cores - busy);

  for (const auto& j : snap.pending) ++project_pending[j.project];
}

void PbaPass::set_service_levels() {
  for (const auto& [name, alloc] : project_alloc) {
    const pba::ProjectDef* p = pplan.project(name);
    if (!p) continue;
    SlaState s;
    if (p->sla.kind == pba::SlaKind::Velocity) {
      // As many jobs in parallel as possible, up to the allocation, at once.
      s.waive_wait = true;
    } else if (p->sla.kind == pba::SlaKind::Throughput) {
      // N jobs by a deadline: hold only the parallelism the deadline needs
      // (leaving the rest of the allocation to others); the need rises as the
      // deadline nears, and with it the jobs' ordering priority.
      int running_jobs = 0;
      for (const auto& r : snap.running)
        if (r.job.project == name) ++running_jobs;
      const auto done_it = cfg.jobs_done.find(name);
      const int done = done_it == cfg.jobs_done.end() ? 0 : done_it->second;
      const int remaining = p->sla.jobs - done - running_jobs;
      double work = 0;
      int n = 0;
      for (const auto& j : snap.pending)
        if (j.project == name) {
          work += static_cast<double>(est_of(j)) * std::max(1, j.slots_min);
          ++n;
        }
      if (remaining <= 0 || n == 0) {
        s.cap = project_pba_used[name];  // target met: no more PBA slots needed
      } else {
        const double mean = work / n;
        const Time left = p->sla.deadline - now;
        // Slots needed in parallel from now on to finish in time.
        const double exact = left <= 0 ? std::numeric_limits<double>::infinity()
                                       : remaining * mean / static_cast<double>(left);
        const double need = std::ceil(exact);
        s.pressure = std::min(1.0, exact / std::max(1, alloc));
        s.waive_wait = exact >= alloc;
        s.cap = need >= alloc ? alloc
                              : std::min(alloc, project_pba_used[name] + static_cast<int>(need));
      }
    }
    sla[name] = s;
  }
}

// Per pending job: pre-qualification, priority, class.
void PbaPass::classify_pending() {
  const std::size_t np = snap.pending.size();
  cls.assign(np, JobClass::Normal);
  eff.assign(np, 0);
  std::vector<double> prio(np, 0);
  allocated.assign(np, 0);
  for (std::size_t i = 0; i < np; ++i) {
    const Job& j = snap.pending[i];
    const pba::Verdict v = pba::qualify(j, pplan, now, cfg.require_project_tag, &project_alloc);
    bool match = false;
    if (v.ok())
      for (auto& b : buckets)
        if (pba::covers(*b.a, j)) match = true;
    allocated[i] = match;
    prio[i] = pba::next_priority(j, match, cfg);
    eff[i] = prio[i];
    plan.updates.push_back({j.id, prio[i], j.cycles_pending + 1});
    if (!v.ok()) {
      cls[i] = JobClass::Lowest;
      if (j.queue != cfg.lowest_queue) {
        Decision d;
        d.action = Action::Demote;
        d.job = j.id;
        d.at = now;
        d.queue = cfg.lowest_queue;
        d.reason = "PBA pre-qualification failed: " + v.reason + "; moved to queue '" + cfg.lowest_queue +
                   "' (runs only on idle slots and may be preempted)";
        plan.decisions.push_back(std::move(d));
      }
    } else if (j.requeues > 0 || j.first_start >= 0) {
      cls[i] = JobClass::Requeued;
    }
  }
}

// Admit allocated jobs to the PBA class, best first, while their allocation
// (and SLA cap) has room: PBA never gives a project more than its allocation.
void PbaPass::admit_allocated() {
  const std::size_t np = snap.pending.size();
  std::vector<std::size_t> pos(np, std::numeric_limits<std::size_t>::max());
  for (std::size_t k = 0; k < st.order.size(); ++k)
    if (st.order[k] < np) pos[st.order[k]] = k;
  std::vector<std::size_t> cand;
  for (std::size_t i = 0; i < np; ++i)
    if (allocated[i]) {
      const auto it = sla.find(snap.pending[i].project);
      if (it != sla.end()) eff[i] += cfg.sla_boost * it->second.pressure;
      cand.push_back(i);
    }
  std::stable_sort(cand.begin(), cand.end(), [&](std::size_t x, std::size_t y) {
    return eff[x] != eff[y] ? eff[x] > eff[y] : pos[x] < pos[y];
  });
  for (std::size_t i : cand) {
    const Job& j = snap.pending[i];
    const int s = std::max(1, j.slots_min);
    const SlaState& ss = sla[j.project];
    bool admitted = false;
    if (project_pba_used[j.project] + s <= ss.cap)
      for (Bucket* b : matching(buckets, j))
        if (b->used + s <= b->a->slots) {
          b->used += s;
          project_pba_used[j.project] += s;
          admitted = true;
          break;
        }
    if (admitted) {
      cls[i] = JobClass::Allocated;
    } else {
      // Beyond the allocation: ranked as a normal job, without the PBA bonus.
      eff[i] -= cfg.allocation_increment + cfg.sla_boost * ss.pressure;
    }
  }
}

// The new order: class, then priority, then the base order.
void PbaPass::reorder() {
  const std::size_t np = snap.pending.size();
  std::stable_sort(st.order.begin(), st.order.end(), [&](std::uint32_t x, std::uint32_t y) {
    if (cls[x] != cls[y]) return cls[x] > cls[y];
    return eff[x] > eff[y];
  });
  // The allocated class stays first through later stages (NCI reorders
  // only the rest): its jobs are what the allocation guarantees.
  st.pinned = 0;
  while (st.pinned < st.order.size() && st.order[st.pinned] < np && cls[st.order[st.pinned]] == JobClass::Allocated)
    ++st.pinned;
}

// Resume suspended jobs whose cores are free again (highest priority first),
// keeping enough free slots for the allocated jobs waiting. A victim is put
// back "with the highest priority among normal jobs", before fresh ones.
void PbaPass::resume_suspended() {
  int pba_need = 0;
  for (std::uint32_t i : st.order)
    if (cls[i] == JobClass::Allocated) pba_need += std::max(1, snap.pending[i].slots_min);
  std::vector<int> node_free(snap.nodes.size(), 0);
  std::vector<std::set<int>> owned(snap.nodes.size());
  for (std::size_t n = 0; n < snap.nodes.size(); ++n) node_free[n] = snap.nodes[n].up ? snap.nodes[n].cores : 0;
  for (std::size_t i : run_idx)
    for (const auto& pl : snap.running[i].placement)
      if (pl.node < snap.nodes.size()) {
        node_free[pl.node] -= static_cast<int>(pl.slots);
        owned[pl.node].insert(pl.cores.begin(), pl.cores.end());
      }
  std::vector<std::size_t> susp;
  for (std::size_t i = 0; i < snap.running.size(); ++i)
    if (snap.running[i].suspended && !freed0.count(snap.running[i].job.id) && !snap.running[i].placement.empty())
      susp.push_back(i);
  std::stable_sort(susp.begin(), susp.end(), [&](std::size_t x, std::size_t y) {
    const auto& a = snap.running[x];
    const auto& b = snap.running[y];
    if (a.job.priority != b.job.priority) return a.job.priority > b.job.priority;
    return a.start < b.start;
  });
  for (std::size_t i : susp) {
    const auto& r = snap.running[i];
    const int s = job_slots(r);
    if (free_slots - s < pba_need) continue;
    bool fits = true;
    for (const auto& pl : r.placement) {
      if (pl.node >= snap.nodes.size() || node_free[pl.node] < static_cast<int>(pl.slots)) fits = false;
      else
        for (int c : pl.cores)
          if (owned[pl.node].count(c)) fits = false;
    }
    if (!fits) continue;
    for (const auto& pl : r.placement) {
      node_free[pl.node] -= static_cast<int>(pl.slots);
      owned[pl.node].insert(pl.cores.begin(), pl.cores.end());
    }
    free_slots -= s;
    Decision d;
    d.action = Action::Resume;
    d.job = r.job.id;
    d.at = now;
    d.slots = s;
    d.placement = r.placement;
    d.reason = "PBA: its cores are free again";
    plan.decisions.push_back(std::move(d));
  }
}

// Victims: running normal jobs, least valued first: demoted jobs, then
// recently started, then the most over-subscribed project, then the project
// with most pending jobs.
std::vector<std::size_t> PbaPass::rank_victims() {
  std::vector<std::size_t> victims;
  for (std::size_t i : run_idx) {
    const auto& r = snap.running[i];
    if (is_protected[i]) continue;
    // Being checkpointed: its slots free when the checkpoint is written; as a
    // victim it would free nothing now and the preemptor's start would wait.
    if (r.stopping) continue;
    // The patent's bound on requeues, over PBA's own preemptions only (pba.hpp).
    if (r.job.pba_preemptions >= cfg.max_requeues) continue;
    victims.push_back(i);
  }
  auto oversub = [&](const std::string& p) {
    const auto a = project_alloc.find(p);
    return project_running[p] - (a == project_alloc.end() ? 0 : a->second);
  };
  const Time bucket = std::max<Time>(1, cfg.victim_start_bucket);
  std::stable_sort(victims.begin(), victims.end(), [&](std::size_t x, std::size_t y) {
    const auto& a = snap.running[x];
    const auto& b = snap.running[y];
    const bool la = a.job.queue == cfg.lowest_queue, lb = b.job.queue == cfg.lowest_queue;
    if (la != lb) return la;
    const Time sa = a.start / bucket, sb = b.start / bucket;
    if (sa != sb) return sa > sb;
    const int oa = oversub(a.job.project), ob = oversub(b.job.project);
    if (oa != ob) return oa > ob;
    const int pa = project_pending[a.job.project], pb = project_pending[b.job.project];
    if (pa != pb) return pa > pb;
    if (a.start != b.start) return a.start > b.start;
    return a.job.id > b.job.id;
  });
  return victims;
}

// Preemption (patent: "free up one over-subscribed job slot for each
// under-subscribed job that has been pending for more than a configurable
// time period on a one for one basis"), victims as rank_victims() orders them.
void PbaPass::preempt() {
  const std::vector<std::size_t> victims = rank_victims();
  std::vector<char> taken(snap.running.size(), 0);
  std::size_t vnext = 0;
  std::vector<std::uint32_t> preemptors;
  for (std::uint32_t i : st.order) {
    if (cls[i] != JobClass::Allocated) break;
    const Job& j = snap.pending[i];
    const int need = std::max(1, j.slots_min);
    if (free_slots >= need) {
      free_slots -= need;  // starts in an idle slot: nothing to preempt
      continue;
    }
    const SlaState& ss = sla[j.project];
    if (!ss.waive_wait && now - j.submit < cfg.preempt_after) continue;
    // Pick the least valued victims until enough slots are freed.
    int lacking = need - free_slots;
    std::vector<std::size_t> chosen;
    for (std::size_t k = vnext; k < victims.size() && lacking > 0; ++k) {
      if (taken[victims[k]]) continue;
      chosen.push_back(victims[k]);
      lacking -= job_slots(snap.running[victims[k]]);
    }
    if (lacking > 0) continue;  // not enough normal jobs to free: wait
    int got = 0;
    for (std::size_t v : chosen) {
      taken[v] = 1;
      const auto& r = snap.running[v];
      got += job_slots(r);
      Decision d;
      d.action = r.job.preempt == PreemptMode::Suspend ? Action::Suspend : Action::Requeue;
      d.job = r.job.id;
      d.at = now;
      d.pba_preemption = true;
      d.reason = "PBA: slot given to job " + std::to_string(j.id) + " of under-subscribed project '" +
                 j.project + "' (allocation " + std::to_string(project_alloc[j.project]) + " slots)";
      plan.decisions.push_back(std::move(d));
      st.freed.push_back(r.job.id);
      if (r.job.preempt == PreemptMode::Requeue)
        plan.updates.push_back({r.job.id, std::max(r.job.priority, r.job.last_start_priority) + cfg.requeue_increment, 0});
    }
    while (vnext < victims.size() && taken[victims[vnext]]) ++vnext;
    free_slots = free_slots + got - need;
    preemptors.push_back(i);
  }
  // Preemptors go to the very front so the planner starts them in the freed slots.
  if (!preemptors.empty()) {
    const std::set<std::uint32_t> pre(preemptors.begin(), preemptors.end());
    std::vector<std::uint32_t> order = preemptors;
    for (std::uint32_t i : st.order)
      if (!pre.count(i)) order.push_back(i);
    st.order = std::move(order);
  }
}

}  // namespace

void pba_stage(const Snapshot& snap, const PbaConfig& cfg, PassState& st, Plan& plan) {
  if (!cfg.enabled) return;
  PbaPass p(snap, cfg, st, plan);
  p.make_buckets();
  p.count_running();
  p.count_free();
  p.set_service_levels();
  p.classify_pending();
  p.admit_allocated();
  p.reorder();
  if (cfg.resume_suspended) p.resume_suspended();
  if (cfg.preempt) p.preempt();
}

}  // namespace corral
