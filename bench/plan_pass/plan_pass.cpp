// One scheduling pass at scale: `plan_pass --pending N --nodes M --policy P`.
// Builds M nodes (32 cores, 128 GiB), fills them with running jobs (a few
// cores left free), queues N pending jobs of mixed sizes and estimates, and
// times ONE schedule() call. Prints one JSON object.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "coordinator/schedule.hpp"

using namespace corral;

int main(int argc, char** argv) {
  long pending = 100000, nodes = 10000, seed = 1, repeat = 1, cores = 32;
  std::string policy = "easy";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--pending") pending = std::atol(argv[i + 1]);
    else if (a == "--nodes") nodes = std::atol(argv[i + 1]);
    else if (a == "--policy") policy = argv[i + 1];
    else if (a == "--seed") seed = std::atol(argv[i + 1]);
    else if (a == "--repeat") repeat = std::atol(argv[i + 1]);
    else if (a == "--cores") cores = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "plan_pass: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  SchedConfig cfg;
  if (auto b = find_name<Backfill>(policy)) {
    cfg.planner.backfill = *b;
  } else {
    std::fprintf(stderr, "plan_pass: unknown policy '%s' (%s)\n", policy.c_str(), names_of<Backfill>().c_str());
    return 2;
  }
  if (pending < 0 || nodes < 1 || cores < 1 || cores > 4096) {
    std::fprintf(stderr, "plan_pass: --pending >= 0, --nodes >= 1, 1 <= --cores <= 4096 required\n");
    return 2;
  }
  cfg.planner.max_reservation = 100;
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  auto U = [&](long a, long b) { return a + static_cast<long>(rng() % static_cast<std::uint64_t>(b - a + 1)); };

  Snapshot s;
  s.now = 1000000;
  s.nodes.resize(static_cast<std::size_t>(nodes));
  JobId id = 1;
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  for (long n = 0; n < nodes; ++n) {
    Node& nd = s.nodes[static_cast<std::size_t>(n)];
    nd.name = "n" + std::to_string(n);
    nd.cores = static_cast<int>(cores);
    nd.mem_mb = 128 * 1024;
    int used = 0;
    const int target = n % 10 == 0 ? nd.cores - std::max(1, nd.cores / 16) : nd.cores;  // leave a few cores free
    while (used < target) {
      int k = std::min<int>(sizes[U(0, 5)], nd.cores);
      k = std::min(k, target - used);
      RunningJob r;
      r.job.id = id++;
      r.job.slots_min = r.job.slots_max = k;
      r.job.walltime = U(600, 86400);
      r.start = s.now - U(0, r.job.walltime - 1);
      r.expected_end = r.start + r.job.walltime;
      r.slots = k;
      Placement p{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(k), {}};
      for (int c = 0; c < k; ++c) p.cores.push_back(used + c);
      r.placement.push_back(std::move(p));
      s.running.push_back(std::move(r));
      used += k;
    }
  }
  s.pending.reserve(static_cast<std::size_t>(pending));
  for (long i = 0; i < pending; ++i) {
    Job j;
    j.id = id++;
    j.submit = s.now - pending + i;
    const long r = U(0, 99);
    j.slots_min = j.slots_max = static_cast<int>(std::min(nodes * cores, r < 70 ? U(1, 8) : r < 90 ? U(16, 64) : U(128, 1024)));
    j.walltime = U(60, 86400);
    j.estimate = U(30, j.walltime);
    j.reserve = U(0, 9) == 0;
    s.pending.push_back(std::move(j));
  }

  // Wall time (pass_ms) and process CPU time (pass_cpu_ms): the machine may be
  // shared, so the CPU figure is the steadier one.
  double best = 1e300, plan_only = 1e300, best_cpu = 1e300;
  Plan plan;
  Planner planner;
  for (long rep = 0; rep < std::max(1L, repeat); ++rep) {
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    plan = schedule(s, cfg, 1, planner);
    const auto t1 = std::chrono::steady_clock::now();
    const std::clock_t c1 = std::clock();
    best_cpu = std::min(best_cpu, 1000.0 * static_cast<double>(c1 - c0) / CLOCKS_PER_SEC);
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
    // The planner alone (ordering done outside the timer).
    PassState st;
    order_pending(s, cfg.order, st);
    Plan p2;
    const auto t2 = std::chrono::steady_clock::now();
    planner.plan(s, cfg.planner, st, p2);
    const auto t3 = std::chrono::steady_clock::now();
    plan_only = std::min(plan_only, std::chrono::duration<double, std::milli>(t3 - t2).count());
  }
  long starts = 0, reservations = 0, rejects = 0;
  for (const Decision& d : plan.decisions) {
    if (d.action == Action::Start) ++starts;
    if (d.action == Action::Reserve) ++reservations;
    if (d.action == Action::Reject) ++rejects;
  }
  std::printf(
      "{\"bench\":\"plan_pass\",\"policy\":\"%s\",\"pending\":%ld,\"nodes\":%ld,\"running\":%zu,"
      "\"cores\":%ld,\"pass_ms\":%.3f,\"pass_cpu_ms\":%.3f,\"planner_ms\":%.3f,\"starts\":%ld,\"reservations\":%ld,\"rejects\":%ld}\n",
      policy.c_str(), pending, nodes, s.running.size(), cores, best, best_cpu, plan_only, starts, reservations, rejects);
  return 0;
}
