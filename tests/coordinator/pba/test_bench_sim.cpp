// Not a unit test: `test_pba "[.bench]"` also replays the first 5000 jobs of
// KTH-SP2 with and without PBA (user 91 = project "hot", 30 of 100 slots
// allocated every week) and prints JSON: the project's mean wait, everyone
// else's, and preemptions. Hidden tag: not run by meson test.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "coordinator/pba/pba.hpp"
#include "coordinator/sim/sim.hpp"
#include "tests/skip.hpp"
#include "tests/traces.hpp"

using namespace corral;

TEST_CASE("bench: KTH-SP2 first 5000 jobs, one project with an allocation", "[.bench]") {
  std::string why;
  const std::string path = corral_test::trace("KTH-SP2-1996-2.1-cln.swf", &why);
  if (path.empty()) {
    CORRAL_SKIP(why);
    return;
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const auto tr = sim::parse_swf(ss.str());
  REQUIRE(!tr.jobs.empty());
  std::string text = "project hot\nmember hot u:91\n";
  for (int w = 0; w <= 12; ++w) text += "alloc hot +" + std::to_string(w) + " 30\n";
  const auto pr = pba::parse_plan(text, {tr.jobs.front().submit});
  REQUIRE(pr.ok());
  std::unordered_map<JobId, long> user;
  for (const auto& j : tr.jobs) user[j.id] = j.user;
  for (bool on : {false, true}) {
    sim::SimOptions opt;
    opt.max_jobs = 5000;
    opt.sched.planner.duration_offset = 0;
    if (on) {
      opt.on_setup = [&](Snapshot&, SchedConfig& c) {
        c.pba.enabled = true;
        c.pba.plan = pr.plan;
        c.pba.require_project_tag = false;  // untagged trace jobs stay normal jobs
      };
      opt.on_arrival = [&](Job& j, const sim::SwfJob&) { j.project = pr.plan.project_of(j.user, j.group); };
    }
    const auto r = sim::simulate(tr, opt);
    double w[2] = {0, 0};
    int n[2] = {0, 0};
    for (const auto& j : r.per_job) {
      if (j.first_start < 0) continue;
      const int k = user[j.id] == 91;
      w[k] += static_cast<double>(j.first_start - j.submit);
      ++n[k];
    }
    std::printf("{\"bench\":\"kth5000\",\"pba\":%s,\"hot_jobs\":%d,\"hot_mean_wait\":%.0f,"
                "\"other_mean_wait\":%.0f,\"utilization\":%.4f,\"preemptions\":%zu,\"sim_seconds\":%.3f}\n",
                on ? "true" : "false", n[1], n[1] ? w[1] / n[1] : 0.0, n[0] ? w[0] / n[0] : 0.0,
                r.utilization, r.preemptions, r.sim_seconds);
    CHECK(r.finished == 5000);
  }
}
