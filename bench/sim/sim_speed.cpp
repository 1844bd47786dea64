// Replay speed of the trace simulator: CTC-SP2 (77k jobs) under easy and
// conservative, best of N runs. Prints one JSON object.
// Usage: sim_speed [TRACE] [--runs N] [--policy P]...
//
// What is timed: the replay only. The trace is parsed once, before any
// timing (parse_seconds says how long that took). <policy>_seconds is the
// wall-clock time of the event loop (SimResult::sim_seconds: every arrival,
// completion and scheduling pass through corral::schedule with a kept
// Planner), best of N. <policy>_cpu_seconds is the process CPU time of the
// whole simulate() call (loop plus setup and summary), best of N: the
// steadier figure on a shared machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/sim/sim.hpp"

using namespace corral;

#ifndef CORRAL_TRACES
#define CORRAL_TRACES "../shared/traces"
#endif

int main(int argc, char** argv) {
  std::string path = std::string(CORRAL_TRACES) + "/CTC-SP2-1996-3.1-cln.swf.gz";
  int runs = 3;
  bool driver = true;
  std::vector<Backfill> policies;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
      if (runs < 1) runs = 1;
    } else if (a == "--policy" && i + 1 < argc) {
      const std::optional<Backfill> b = find_name<Backfill>(argv[++i]);
      if (!b) {
        std::fprintf(stderr, "sim_speed: unknown policy '%s' (%s)\n", argv[i], names_of<Backfill>().c_str());
        return 2;
      }
      policies.push_back(*b);
    } else if (a == "--no-driver") {
      driver = false;  // skip the first-fit driver figure (e.g. under perf)
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "sim_speed: unknown option %s\nusage: sim_speed [TRACE] [--runs N] [--policy P]... [--no-driver]\n", a.c_str());
      return 2;
    } else {
      path = a;
    }
  }
  if (policies.empty()) policies = {Backfill::Easy, Backfill::Conservative};
  sim::SwfTrace tr;
  const auto p0 = std::chrono::steady_clock::now();
  try {
    tr = sim::read_swf(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sim_speed: %s\n", e.what());
    return 2;
  }
  const double parse_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  std::printf("{\"trace\": %s, \"jobs\": %zu, \"runs\": %d, \"measures\": %s, \"parse_seconds\": %.4f",
              nlohmann::json(path).dump().c_str(), tr.jobs.size(), runs,
              nlohmann::json("replay only (trace parsed before timing); seconds: event loop wall time, best of runs; "
                             "cpu_seconds: process CPU time of simulate(), best of runs")
                  .dump()
                  .c_str(),
              parse_s);
  for (Backfill b : policies) {
    sim::SimOptions opt;
    opt.sched.planner.backfill = b;
    double best = 1e30, best_cpu = 1e30;
    std::size_t passes = 0;
    double bsld = 0;
    for (int r = 0; r < runs; ++r) {
      const std::clock_t c0 = std::clock();
      sim::SimResult res = sim::simulate(tr, opt);
      const std::clock_t c1 = std::clock();
      best = std::min(best, res.sim_seconds);
      best_cpu = std::min(best_cpu, static_cast<double>(c1 - c0) / CLOCKS_PER_SEC);
      passes = res.passes;
      bsld = res.mean_bsld;
    }
    const std::string pn(name(b));
    const char* n = pn.c_str();
    std::printf(", \"%s_seconds\": %.4f, \"%s_cpu_seconds\": %.4f, \"%s_passes\": %zu, \"%s_pass_us\": %.3f, \"%s_mean_bsld\": %.4f",
                n, best, n, best_cpu, n, passes, n, passes ? 1e6 * best / static_cast<double>(passes) : 0.0, n, bsld);
  }
  // The driver's own cost: the same replay with a trivial first-fit pass (any
  // job that fits starts; queues stay short as under EASY) instead of the core:
  // shows how much of the time is the simulator, how much the planner.
  if (driver) {
    sim::SimOptions opt;
    opt.scheduler = [](const Snapshot& s, const SchedConfig&, std::uint64_t) {
      Plan p;
      std::int64_t free = 0;
      for (const Node& n : s.nodes) free += n.cores;
      for (const RunningJob& r : s.running) free -= r.slots;
      for (const Job& j : s.pending) {
        if (j.slots_min > free) continue;
        free -= j.slots_min;
        Decision d;
        d.job = j.id;
        d.at = s.now;
        d.slots = j.slots_min;
        p.decisions.push_back(std::move(d));
      }
      return p;
    };
    double best = 1e30;
    for (int r = 0; r < runs; ++r) best = std::min(best, sim::simulate(tr, opt).sim_seconds);
    std::printf(", \"driver_only_firstfit_seconds\": %.4f", best);
  }
  std::printf("}\n");
  return 0;
}
