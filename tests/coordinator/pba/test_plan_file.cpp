#include <catch2/catch.hpp>

#include <algorithm>

#include "coordinator/names.hpp"
#include "coordinator/pba/plan_file.hpp"
#include "tests/coordinator/pba/week48.hpp"

using namespace corral;
using namespace corral::pba;

namespace {

bool has_error(const PlanParseResult& r, const std::string& needle) {
  return std::any_of(r.errors.begin(), r.errors.end(),
                     [&](const std::string& e) { return e.find(needle) != std::string::npos; });
}
}  // namespace

TEST_CASE("plan file: a complete plan parses", "[planfile]") {
  const std::string text = R"(# Corral project plan
project chip          # a project
member chip u:12 g:3 user:alice group:staff bob
flow chip asic synthesis netlist_verification physical_verification
alloc chip 2026-W48 10
alloc chip +1 20 user=alice step=synthesis
alloc chip +2 5 group=g:3
sla chip throughput 500 +14d
project web
member web u:7
sla web velocity
alloc web 2026-W49 4 user=u:7
grant chip 100000 period=quarter
grant web 2500.5
queue express priority=3 charge=3 max_walltime=24h max_cpus=64
queue normal priority=2 charge=1
queue bonus priority=1 charge=0 hosts=n1,n2
)";
  const auto r = parse_plan(text, {kW48 + 3600});
  INFO((r.errors.empty() ? std::string() : r.errors.front()));
  REQUIRE(r.ok());
  const auto& p = r.plan;
  REQUIRE(p.projects.size() == 2);
  const ProjectDef* chip = p.project("chip");
  REQUIRE(chip);
  CHECK(chip->users == std::set<std::string>{"12", "alice", "bob"});
  CHECK(chip->groups == std::set<std::string>{"3", "staff"});
  REQUIRE(chip->flows.size() == 1);
  CHECK(chip->flows[0].steps.size() == 3);
  CHECK(chip->has_step("synthesis"));
  CHECK(chip->sla.kind == SlaKind::Throughput);
  CHECK(chip->sla.jobs == 500);
  CHECK(chip->sla.deadline == kW48 + 3600 + 14 * kDay);
  CHECK(p.project("web")->sla.kind == SlaKind::Velocity);
  REQUIRE(p.allocations.size() == 4);
  CHECK(p.allocations[0].week == IsoWeek{2026, 48});
  CHECK(p.allocations[0].slots == 10);
  CHECK(p.allocations[1].week == IsoWeek{2026, 49});  // +1 from the origin's week
  CHECK(p.allocations[1].user == "alice");
  CHECK(p.allocations[1].step == "synthesis");
  CHECK(p.allocations[1].line == 6);
  CHECK(p.allocations[2].week == IsoWeek{2026, 50});
  CHECK(p.allocations[2].group == "3");
  CHECK(p.allocations[3].user == "7");
  CHECK(p.allocated_slots("chip", kW48) == 10);
  CHECK(p.allocated_slots("chip", kW48 + kWeek) == 20);
  CHECK(p.allocated_slots("web", kW48) == 0);
  REQUIRE(p.grants.size() == 2);
  CHECK(p.grants[0].su == 100000);
  CHECK(p.grants[0].period == 91 * kDay);
  CHECK(p.grants[1].su == 2500.5);
  CHECK(p.grants[1].period == 0);
  REQUIRE(p.queues.size() == 3);
  CHECK(p.queues[0].name == "express");
  CHECK(p.queues[0].charge_factor == 3);
  CHECK(p.queues[0].priority == 3);
  CHECK(p.queues[0].max_walltime == 24 * 3600);
  CHECK(p.queues[0].max_cpus == 64);
  CHECK(p.queues[2].charge_factor == 0);
  CHECK(p.queues[2].hosts == std::vector<std::string>{"n1", "n2"});
}

TEST_CASE("plan file: every bad line is reported with its number", "[planfile]") {
  const std::string text =
      "project a\n"                         // 1
      "frobnicate a\n"                      // 2 unknown directive
      "member b u:1\n"                      // 3 unknown project
      "alloc a 2026-W54 3\n"                // 4 bad week
      "alloc a 2026-W48 x\n"                // 5 bad slots
      "alloc a 2026-W48 2 colour=red\n"     // 6 bad narrowing
      "alloc a 2026-W48 2\n"                // 7 ok
      "alloc a 2026-W48 3\n"                // 8 duplicate
      "flow a f s1 s2\n"                    // 9 ok
      "alloc a 2026-W49 1 step=nope\n"      // 10 unknown step
      "alloc a +13 1\n"                     // 11 beyond 12 weeks
      "sla a throughput 0 +1d\n"            // 12 bad count
      "member a x:1\n"                      // 13 bad member
      "queue q charge=-1\n"                 // 14 bad charge
      "project a\n"                         // 15 twice
      "grant a lots\n";                     // 16 bad SU
  const auto r = parse_plan(text, {kW48});
  CHECK_FALSE(r.ok());
  CHECK(has_error(r, "line 2: unknown directive 'frobnicate'"));
  CHECK(has_error(r, "line 3: unknown project 'b'"));
  CHECK(has_error(r, "line 4: bad ISO week '2026-W54'"));
  CHECK(has_error(r, "line 5: bad slot count 'x'"));
  CHECK(has_error(r, "line 6: unknown narrowing 'colour'"));
  CHECK(has_error(r, "line 8: duplicate allocation for a in 2026-W48 (first given on line 7)"));
  CHECK(has_error(r, "line 10: project 'a' has no flow step 'nope'"));
  CHECK(has_error(r, "line 11: allocation for 2027-W08 is 13 weeks ahead of 2026-W48"));
  CHECK(has_error(r, "line 12: bad job count"));
  CHECK(has_error(r, "line 13: bad member 'x:1'"));
  CHECK(has_error(r, "line 14: bad value for charge"));
  CHECK(has_error(r, "line 15: project 'a' declared twice"));
  CHECK(has_error(r, "line 16: bad service units"));
  CHECK(r.errors.size() == 15 - 2);  // lines 2..16 except the good lines 7 and 9
  // Nothing lost: the good lines are still in the plan.
  CHECK(r.plan.allocations.size() == 1);
  CHECK(r.plan.project("a")->flows.size() == 1);
}

TEST_CASE("plan file: horizon is 12 weeks by default and configurable", "[planfile]") {
  CHECK(parse_plan("project a\nalloc a +12 1\n", {kW48}).ok());
  CHECK(parse_plan("project a\nalloc a 2027-W07 1\n", {kW48}).ok());   // 12 weeks after W48 (W53 exists)
  CHECK_FALSE(parse_plan("project a\nalloc a 2027-W08 1\n", {kW48}).ok());
  CHECK(parse_plan("horizon 20\nproject a\nalloc a +20 1\n", {kW48}).ok());
  CHECK(parse_plan("project a\nalloc a +30 1\nhorizon 30\n", {kW48}).ok());  // set anywhere
  CHECK_FALSE(parse_plan("horizon 20\nproject a\nalloc a +21 1\n", {kW48}).ok());
}

TEST_CASE("plan file: run-time allocation changes", "[planfile]") {
  auto r = parse_plan("project a\nflow a f s1\nalloc a 2026-W48 2\n", {kW48});
  REQUIRE(r.ok());
  ProjectPlan p = r.plan;
  Allocation a;
  a.project = "a";
  a.week = IsoWeek{2026, 48};
  a.slots = 7;
  CHECK_FALSE(set_allocation(p, a, kW48));  // replaces the same key
  CHECK(p.allocated_slots("a", kW48) == 7);
  a.step = "s1";
  a.slots = 1;
  CHECK_FALSE(set_allocation(p, a, kW48));  // a narrowed entry is its own key
  CHECK(p.allocated_slots("a", kW48) == 8);
  a.slots = 0;
  CHECK_FALSE(set_allocation(p, a, kW48));  // 0 removes it
  CHECK(p.allocated_slots("a", kW48) == 7);
  a.week = IsoWeek{2027, 10};
  a.slots = 3;
  const auto e = set_allocation(p, a, kW48);
  REQUIRE(e);
  CHECK(e->find("at most 12 weeks ahead") != std::string::npos);
  a.week = IsoWeek{2026, 49};
  a.project = "zzz";
  CHECK(set_allocation(p, a, kW48) == std::optional<std::string>("unknown project 'zzz'"));
  a.project = "a";
  a.step = "s9";
  CHECK(set_allocation(p, a, kW48));
  CHECK(p.allocations.size() == 1);  // failed changes changed nothing
}

TEST_CASE("plan file: durations and deadlines", "[planfile]") {
  CHECK(find_duration("90") == 90);
  CHECK(find_duration("90s") == 90);
  CHECK(find_duration("30m") == 1800);
  CHECK(find_duration("2h") == 7200);
  CHECK(find_duration("1d") == kDay);
  CHECK(find_duration("2w") == 2 * kWeek);
  CHECK_FALSE(find_duration("2x"));
  CHECK_FALSE(find_duration("h"));
  CHECK_FALSE(find_duration("-5"));
  auto r = parse_plan("project a\nsla a throughput 10 2026-W50\n", {kW48});
  REQUIRE(r.ok());
  CHECK(r.plan.projects[0].sla.deadline == week_start(IsoWeek{2026, 51}));
  r = parse_plan("project a\nsla a throughput 10 1800000000\n", {kW48});
  REQUIRE(r.ok());
  CHECK(r.plan.projects[0].sla.deadline == 1800000000);
}

TEST_CASE("plan file: project tag for trace jobs from membership", "[planfile]") {
  auto r = parse_plan("project a\nmember a u:12 g:3\nproject b\nmember b u:7 g:4\n", {kW48});
  REQUIRE(r.ok());
  CHECK(r.plan.project_of("12", "") == "a");
  CHECK(r.plan.project_of("7", "3") == "b");   // the user decides first
  CHECK(r.plan.project_of("99", "3") == "a");  // else the group
  CHECK(r.plan.project_of("99", "98") == "");
}
