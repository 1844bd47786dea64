// Replay speed of the trace simulator: CTC-SP2 (77k jobs) under easy and
// conservative, best of N runs. Prints one JSON object.
// Usage: sim_speed [TRACE] [--runs N]
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "coordinator/sim/sim.hpp"

using namespace corral;

#ifndef CORRAL_TRACES
#define CORRAL_TRACES "../shared/traces"
#endif

int main(int argc, char** argv) {
  std::string path = std::string(CORRAL_TRACES) + "/CTC-SP2-1996-3.1-cln.swf.gz";
  int runs = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
      if (runs < 1) runs = 1;
    } else {
      path = a;
    }
  }
  sim::SwfTrace tr;
  try {
    tr = sim::read_swf(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sim_speed: %s\n", e.what());
    return 2;
  }
  std::printf("{\"trace\": %s, \"jobs\": %zu, \"runs\": %d", sim::json_string(path).c_str(), tr.jobs.size(), runs);
  for (Backfill b : {Backfill::Easy, Backfill::Conservative}) {
    sim::SimOptions opt;
    opt.sched.planner.backfill = b;
    double best = 1e30;
    std::size_t passes = 0;
    for (int r = 0; r < runs; ++r) {
      sim::SimResult res = sim::simulate(tr, opt);
      best = std::min(best, res.sim_seconds);
      passes = res.passes;
    }
    const char* name = b == Backfill::Easy ? "easy" : "conservative";
    std::printf(", \"%s_seconds\": %.4f, \"%s_passes\": %zu", name, best, name, passes);
  }
  // The driver's own cost: the same replay with a trivial first-fit pass (any
  // job that fits starts; queues stay short as under EASY) instead of the core:
  // shows how much of the time is the simulator, how much the planner.
  {
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
