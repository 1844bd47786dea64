// The MONITOR example of sge6-reservation-backfill.txt section 2d: three
// licence jobs (-R y) on a cluster with global license=5, six intervals.
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

#include "coordinator/planner/planner.hpp"
#include "tests/coordinator/planner/helpers.hpp"

using namespace corral;
using namespace corral::testing;

namespace {

// Verbatim from the specification.
const char* kSpec = R"(::::::::
3127:1:STARTING:1077903416:30:G:global:license:4.000000
3127:1:STARTING:1077903416:30:Q:all.q@carc:slots:1.000000
3128:1:RESERVING:1077903446:30:G:global:license:5.000000
3128:1:RESERVING:1077903446:30:Q:all.q@bilbur:slots:1.000000
3129:1:RESERVING:1077903476:31:G:global:license:1.000000
3129:1:RESERVING:1077903476:31:Q:all.q@es-ergb01-01:slots:1.000000
::::::::
3127:1:RUNNING:1077903416:30:G:global:license:4.000000
3127:1:RUNNING:1077903416:30:Q:all.q@carc:slots:1.000000
3128:1:RESERVING:1077903446:30:G:global:license:5.000000
3128:1:RESERVING:1077903446:30:Q:all.q@es-ergb01-01:slots:1.000000
3129:1:RESERVING:1077903476:31:G:global:license:1.000000
3129:1:RESERVING:1077903476:31:Q:all.q@es-ergb01-01:slots:1.000000
::::::::
3128:1:STARTING:1077903448:30:G:global:license:5.000000
3128:1:STARTING:1077903448:30:Q:all.q@carc:slots:1.000000
3129:1:RESERVING:1077903478:31:G:global:license:1.000000
3129:1:RESERVING:1077903478:31:Q:all.q@bilbur:slots:1.000000
::::::::
3128:1:RUNNING:1077903448:30:G:global:license:5.000000
3128:1:RUNNING:1077903448:30:Q:all.q@carc:slots:1.000000
3129:1:RESERVING:1077903478:31:G:global:license:1.000000
3129:1:RESERVING:1077903478:31:Q:all.q@es-ergb01-01:slots:1.000000
::::::::
3129:1:STARTING:1077903480:31:G:global:license:1.000000
3129:1:STARTING:1077903480:31:Q:all.q@carc:slots:1.000000
::::::::
3129:1:RUNNING:1077903480:31:G:global:license:1.000000
3129:1:RUNNING:1077903480:31:Q:all.q@carc:slots:1.000000
::::::::
)";

Job lic_job(JobId id, std::int64_t lic, Time rt, int prio) {
  Job j = job(id, 1, rt);
  j.consumables["license"] = lic;
  j.reserve = true;
  j.priority = prio;
  return j;
}

// Grid Engine picks the queue instance by load; we pick by our own rule, so
// host names are compared separately from the rest of each line.
std::string mask_hosts(const std::string& s) { return std::regex_replace(s, std::regex("@[^:]+:"), "@HOST:"); }

}  // namespace

TEST_CASE("MONITOR reproduces the specification's schedule file", "[planner][monitor]") {
  Snapshot s = cluster(3);
  s.nodes[0].name = "carc";
  s.nodes[1].name = "bilbur";
  s.nodes[2].name = "es-ergb01-01";
  Queue q;
  q.name = "all.q";
  s.queues.push_back(q);
  s.global["license"] = 5;
  const Job l4 = lic_job(3127, 4, 30, 100), l5 = lic_job(3128, 5, 30, 0), l1 = lic_job(3129, 1, 31, 0);
  PlannerConfig cfg = cfg_of(Backfill::Reserve);
  cfg.max_reservation = 20;
  cfg.monitor = true;
  cfg.duration_offset = 0;  // the example shows no offset

  std::vector<std::string> out;
  auto pass = [&](Time now, std::vector<Job> pending, std::vector<RunningJob> run) {
    s.now = now;
    s.pending = std::move(pending);
    s.running = std::move(run);
    Plan p = testing::run(s, cfg);
    out.insert(out.end(), p.monitor.begin(), p.monitor.end());
    return p;
  };
  auto as_running = [&](const Job& j, const Plan& p) {
    const Decision* d = find(p, j.id, Action::Start);
    REQUIRE(d);
    RunningJob r;
    r.job = j;
    r.start = d->at;
    r.expected_end = d->at + j.walltime;
    r.slots = d->slots;
    r.placement = d->placement;
    return r;
  };
  const Time T = 1077903416;
  Plan p1 = pass(T, {l4, l5, l1}, {});
  const RunningJob r4 = as_running(l4, p1);
  pass(T + 15, {l5, l1}, {r4});
  Plan p3 = pass(T + 32, {l5, l1}, {});
  const RunningJob r5 = as_running(l5, p3);
  pass(T + 40, {l1}, {r5});
  Plan p5 = pass(T + 64, {l1}, {});
  const RunningJob r1 = as_running(l1, p5);
  pass(T + 70, {}, {r1});
  pass(T + 120, {}, {});

  std::istringstream in(kSpec);
  std::vector<std::string> spec;
  for (std::string line; std::getline(in, line);) spec.push_back(line);
  REQUIRE(out.size() == spec.size());
  for (std::size_t i = 0; i < spec.size(); ++i) {
    INFO("line " << i << ": " << out[i]);
    CHECK(mask_hosts(out[i]) == mask_hosts(spec[i]));
  }
  // Host names printed are the hosts of the decisions.
  for (const std::string& l : out)
    if (l.find(":Q:") != std::string::npos)
      CHECK(std::regex_search(l, std::regex("@(carc|bilbur|es-ergb01-01):slots:1\\.000000$")));
}

TEST_CASE("MONITOR is empty unless enabled; host-level lines", "[planner][monitor]") {
  Snapshot s = cluster(1, 4);
  s.nodes[0].mem_mb = 1000;
  Job j = job(1, 2, 10);
  j.mem_mb = 300;
  s.pending = {j};
  PlannerConfig cfg = cfg_of(Backfill::Easy);
  Plan p = run(s, cfg);
  CHECK(p.monitor.empty());
  cfg.monitor = true;
  p = run(s, cfg);
  REQUIRE(p.monitor.size() == 3);
  CHECK(p.monitor[0] == "::::::::");
  CHECK(p.monitor[1] == "1:1:STARTING:0:10:H:n0:mem_mb:300.000000");
  CHECK(p.monitor[2] == "1:1:STARTING:0:10:Q:all.q@n0:slots:2.000000");
}

TEST_CASE("MONITOR has a P line for a parallel-environment job", "[planner][monitor]") {
  // sge6-reservation-backfill.txt 2d: level P = PE, object = the PE name,
  // resource "slots", amount = the slots granted.
  Snapshot s = cluster(4, 2, 100);
  Job a = job(1, 6, 50);
  a.pe = "mpi";
  a.slots_min = 4;  // a slot range: 6 of the 8 free slots are granted
  Job b = job(2, 8, 20);
  b.pe = "mpi";
  Job c = job(3, 1, 10);  // not a PE job: no P line
  s.pending = {a, b, c};
  PlannerConfig cfg = cfg_of(Backfill::Conservative);
  cfg.monitor = true;
  Plan p = run(s, cfg);
  std::vector<std::string> pl;
  for (const std::string& l : p.monitor)
    if (l.find(":P:") != std::string::npos) pl.push_back(l);
  bool c_listed = false;
  for (const std::string& l : p.monitor)
    if (l.rfind("3:1:", 0) == 0) c_listed = true;
  CHECK(c_listed);  // job 3 has its Q line, but no P line (counted below)
  REQUIRE(pl.size() == 2);
  CHECK(pl[0] == "1:1:STARTING:100:50:P:mpi:slots:6.000000");
  CHECK(pl[1] == "2:1:RESERVING:150:20:P:mpi:slots:8.000000");
  // A running PE job is listed as RUNNING on the next pass.
  RunningJob r;
  r.job = a;
  r.start = 100;
  r.expected_end = 150;
  r.slots = 6;
  r.placement = find(p, 1, Action::Start)->placement;
  s.running = {r};
  s.pending = {b};
  s.now = 110;
  p = run(s, cfg);
  bool running_p = false;
  for (const std::string& l : p.monitor) running_p |= l == "1:1:RUNNING:100:50:P:mpi:slots:6.000000";
  CHECK(running_p);
}
