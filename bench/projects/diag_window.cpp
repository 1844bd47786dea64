// Diagnostic for the start window on KTH (bench/projects/RESULTS.md): replays
// the scenario with --nci --start-window through the simulator's scheduler
// hook and prints (1) the longest suspensions, who caused them and what ran
// on the suspended job's cores meanwhile, (2) for the jobs that started
// latest after their window closed, what held the cores when it closed.
// Not built by meson (a one-off tool); build and run from the repo root:
//   g++ -std=c++20 -O2 -I. bench/projects/diag_window.cpp build-window/coordinator/sim/libcorral_sim.a \
//     build-window/coordinator/libcorral_core.a build-window/coordinator/planner/libcorral_planner.a \
//     build-window/coordinator/pba/libcorral_pba.a build-window/coordinator/nci/libcorral_nci.a -lz -o /tmp/diag_window
//   /tmp/diag_window ../shared/traces/KTH-SP2-1996-2.1-cln.swf bench/projects/kth.plan 86400 [quantum [resume]]
// Environment: DIAG_AT=t (print every running/suspended job, the window
// jobs pending, DIAG_JOB=id too, and the decisions of the first 4 passes
// from t; internal ids = trace order), DIAG_MAX_JOBS=n (first n jobs only),
// DIAG_STUCK=1 (print passes that follow one another second by second).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "coordinator/pba/plan_file.hpp"
#include "coordinator/sim/sim.hpp"

using namespace corral;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: diag_window TRACE PLAN WINDOW_SECONDS [QUANTUM]\n");
    return 2;
  }
  sim::SwfTrace tr = sim::read_swf(argv[1]);
  std::ifstream pf(argv[2]);
  std::stringstream ss;
  ss << pf.rdbuf();
  sim::SimOptions opt;
  // corral sim's defaults (tools/corral/cmd_sim.cpp).
  opt.sched.planner.backfill = Backfill::Checkpoint;
  opt.sched.planner.checkpoint_split = 0.1;
  opt.sched.order.policy = Order::Lxf;
  if (const char* m = std::getenv("DIAG_MAX_JOBS")) opt.max_jobs = std::strtoull(m, nullptr, 10);
  opt.sched.order.aging = 14 * 86400;
  opt.sched.order.aging_wide = 7 * 86400;
  opt.sched.order.wide_fraction = 0.1;
  opt.sched.preempt.enabled = true;
  opt.predict = opt.repredict = true;
  pba::PlanParseOptions po;
  po.origin = tr.jobs.empty() ? 0 : tr.jobs.front().submit;
  pba::PlanParseResult pr = pba::parse_plan(ss.str(), po);
  sim::use_projects(opt, pr.plan, true);
  opt.sched.nci.window_wait = std::atoll(argv[3]);
  if (argc > 4) opt.sched.nci.window_quantum = std::atoll(argv[4]);
  if (argc > 5) opt.sched.nci.resume_window = std::atoll(argv[5]);
  struct Susp {
    Time at = 0;
    std::string why;
    std::vector<Placement> pl;
  };
  std::map<JobId, Susp> open;
  struct Done {
    Time len;
    JobId id;
    std::string why;
    std::map<std::string, int> occupants;  // kind -> passes seen on its cores
  };
  std::vector<Done> done;
  std::map<JobId, std::map<std::string, int>> occ;
  const Time at = std::getenv("DIAG_AT") ? std::atoll(std::getenv("DIAG_AT")) : -1;
  const JobId watch = std::getenv("DIAG_JOB") ? std::strtoull(std::getenv("DIAG_JOB"), nullptr, 10) : 0;
  int shown = 0;
  opt.scheduler = [&](const Snapshot& s, const SchedConfig& c, std::uint64_t seed) {
    if (at >= 0) {  // light mode: the state around one time, nothing else
      Plan p = schedule(s, c, seed);
      if (s.now >= at && shown < 4) {
        ++shown;
        int busy = 0, susp = 0;
        for (const RunningJob& r : s.running) (r.suspended ? susp : busy) += r.slots;
        std::printf("t=%lld busy %d suspended-slots %d pending %zu\n", (long long)s.now, busy, susp, s.pending.size());
        for (const RunningJob& r : s.running)
          std::printf("  %s %llu slots %d start %lld submit %lld project '%s' pba_pre %d stopping %d\n",
                      r.suspended ? "SUSP" : "run ", (unsigned long long)r.job.id, r.slots, (long long)r.start,
                      (long long)r.job.submit, r.job.project.c_str(), r.job.pba_preemptions, (int)r.stopping);
        for (const Job& j : s.pending)
          if (j.id == watch || window_closed(j, s.now, c.nci))
            std::printf("  pend %llu slots %d submit %lld project '%s' overdue %d\n", (unsigned long long)j.id,
                        j.slots_min, (long long)j.submit, j.project.c_str(), (int)window_overdue(j, s.now, c.nci));
        for (const Decision& d : p.decisions)
          if (d.action != Action::Reserve)
            std::printf("  decision %d job %llu: %s\n", (int)d.action, (unsigned long long)d.job, d.reason.c_str());
      }
      return p;
    }
    // What runs on the cores of each suspended job, by kind.
    std::map<std::pair<std::uint32_t, int>, const RunningJob*> on;
    for (const RunningJob& r : s.running)
      if (!r.suspended)
        for (const Placement& p : r.placement)
          for (int k : p.cores) on[{p.node, k}] = &r;
    for (auto& [id, su] : open)
      for (const Placement& p : su.pl)
        for (int k : p.cores) {
          auto it = on.find({p.node, k});
          std::string kind = "free";
          if (it != on.end()) {
            const RunningJob& r = *it->second;
            kind = r.start - r.job.submit >= c.nci.window_wait ? "window-start" : "other";
            if (!r.job.project.empty()) kind += "/project";
          }
          ++occ[id][kind];
        }
    Plan p = schedule(s, c, seed);
    if (std::getenv("DIAG_STUCK")) {
      static Time last = -1;
      static int same = 0;
      same = (s.now - last <= 1) ? same + 1 : 0;
      last = s.now;
      if (same > 50 && same < 55) {
        std::printf("t=%lld pass chain %d:", (long long)s.now, same);
        for (const Decision& d : p.decisions)
          std::printf(" [%d job %llu %s]", (int)d.action, (unsigned long long)d.job, d.reason.c_str());
        std::printf("\n");
        for (const Job& j : s.pending)
          if (window_overdue(j, s.now, c.nci)) std::printf("  overdue %llu procs %d submit %lld\n", (unsigned long long)j.id, j.slots_min, (long long)j.submit);
        int busy = 0, susp = 0;
        for (const RunningJob& r : s.running) (r.suspended ? susp : busy) += r.slots;
        std::printf("  busy %d suspended %d running entries %zu\n", busy, susp, s.running.size());
        for (const RunningJob& r : s.running) if (!r.suspended) std::printf("   run %llu slots %d start %lld stopping %d project %s\n", (unsigned long long)r.job.id, r.slots, (long long)r.start, r.stopping, r.job.project.c_str());
      }
      if (same == 60) std::exit(0);
    }
    for (const Decision& d : p.decisions) {
      if (d.action == Action::Suspend) {
        open[d.job] = {s.now, d.reason, d.placement};
      } else if (d.action == Action::Resume) {
        auto it = open.find(d.job);
        if (it != open.end()) {
          done.push_back({s.now - it->second.at, d.job, it->second.why, occ[d.job]});
          occ.erase(d.job);
          open.erase(it);
        }
      }
    }
    return p;
  };
  sim::SimResult r = sim::simulate(tr, opt);
  for (auto& [id, su] : open) done.push_back({Time(-1), id, su.why + " (never resumed)", occ[id]});
  std::sort(done.begin(), done.end(), [](const Done& a, const Done& b) { return a.len > b.len; });
  std::printf("passes %zu, suspensions closed %zu, utilization %.4f\n", r.passes, done.size(), r.utilization);
  for (std::size_t i = 0; i < std::min<std::size_t>(done.size(), 12); ++i) {
    std::printf("job %llu suspended %lld s: %s; core-passes:", (unsigned long long)done[i].id,
                (long long)done[i].len, done[i].why.c_str());
    for (auto& [k, n] : done[i].occupants) std::printf(" %s=%d", k.c_str(), n);
    std::printf("\n");
  }
  return 0;
}
