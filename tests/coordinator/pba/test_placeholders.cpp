// Placeholder ("dummy") slots for resource-intensive jobs, with the patent's
// example: a 4-slot host with 16 GB, one slot = one core + 4 GB.
#include <catch2/catch.hpp>

#include "coordinator/pba/pba.hpp"

using namespace corral;
using namespace corral::pba;

namespace {
constexpr std::int64_t GB = 1024;
Node host() { return Node{"h", 4, 16 * GB, 0, {}, {}, true}; }

RunningJob running(JobId id, std::int64_t mem, int slots, bool suspended = false) {
  RunningJob r;
  r.job.id = id;
  r.job.mem_mb = mem;
  r.job.slots_min = r.job.slots_max = slots;
  r.slots = slots;
  r.placement.push_back(Placement{0, static_cast<std::uint32_t>(slots), {}});
  r.suspended = suspended;
  return r;
}
}  // namespace

TEST_CASE("placeholders: standard share and the 12 GB job on a 4 x 4 GB host", "[placeholder]") {
  const Node h = host();
  CHECK(standard_share_mb(h) == 4 * GB);
  CHECK(placeholders_for(h, 1, 12 * GB) == 2);      // slots 2 and 3 hold dummies
  CHECK(placeholders_for(h, 1, 4 * GB) == 0);       // a standard job
  CHECK(placeholders_for(h, 1, 4 * GB + 1) == 1);   // just above one share
  CHECK(placeholders_for(h, 2, 12 * GB) == 1);      // 2 slots carry 8 GB: one more
  CHECK(placeholders_for(Node{"m", 4, 0, 0, {}, {}, true}, 1, 12 * GB) == 0);  // memory not tracked
  CHECK(is_light(h, 1, 2 * GB));
  CHECK_FALSE(is_light(h, 1, 4 * GB));
  CHECK(is_light(h, 1, 0));  // claims no memory: cannot thrash the host

  Snapshot s;
  s.nodes.push_back(h);
  s.running.push_back(running(1, 12 * GB, 1));
  NodeLoad l = node_loads(s)[0];
  CHECK(l.heavy_or_standard == 1);
  CHECK(l.placeholders == 2);
  CHECK(l.light == 0);

  // No second heavy job lands there.
  CHECK_FALSE(may_place(h, l, 1, 12 * GB));
  CHECK_FALSE(may_place(h, l, 1, 6 * GB));
  // One more standard job fits (the fourth slot) ...
  CHECK(may_place(h, l, 1, 4 * GB));
  CHECK_FALSE(may_place(h, l, 2, 8 * GB));
  // ... and light jobs may run in the placeholder slots.
  CHECK(may_place(h, l, 1, 1 * GB));
  CHECK(may_place(h, l, 2, 1 * GB));        // both dummy slots
  CHECK(may_place(h, l, 3, 1 * GB));        // dummies + the free slot
  CHECK_FALSE(may_place(h, l, 4, 1 * GB));  // only three cores left

  // Fill: standard job in the last real slot, then light jobs in the dummies.
  add_placement(h, l, 1, 4 * GB);
  CHECK_FALSE(may_place(h, l, 1, 4 * GB));
  CHECK(may_place(h, l, 1, 2 * GB));
  add_placement(h, l, 1, 2 * GB);
  add_placement(h, l, 1, 2 * GB);
  CHECK_FALSE(may_place(h, l, 1, 1 * GB));  // all four cores in use

  // A light job that sits in a dummy slot does not take the real free slot.
  NodeLoad l2 = node_loads(s)[0];
  add_placement(h, l2, 1, 1 * GB);
  CHECK(may_place(h, l2, 1, 4 * GB));
}

TEST_CASE("placeholders: suspended heavy jobs keep theirs; freed jobs count as gone", "[placeholder]") {
  Snapshot s;
  s.nodes.push_back(host());
  s.running.push_back(running(1, 12 * GB, 1, /*suspended=*/true));
  NodeLoad l = node_loads(s)[0];
  CHECK(l.heavy_or_standard == 0);
  CHECK(l.placeholders == 2);                 // its memory stays held
  CHECK_FALSE(may_place(s.nodes[0], l, 1, 12 * GB));
  CHECK(may_place(s.nodes[0], l, 2, 4 * GB));
  s.running[0].suspended = false;
  l = node_loads(s, {1})[0];
  CHECK(l.placeholders == 0);
  CHECK(may_place(s.nodes[0], l, 1, 12 * GB));
  // A down node takes nothing.
  s.nodes[0].up = false;
  CHECK_FALSE(may_place(s.nodes[0], NodeLoad{}, 1, 1 * GB));
}

TEST_CASE("placeholders: a multi-node job's memory is split by its slots", "[placeholder]") {
  Job j;
  j.mem_mb = 24 * GB;
  CHECK(mem_on_node(j, 4, 1) == 6 * GB);
  CHECK(mem_on_node(j, 4, 3) == 18 * GB);
  Snapshot s;
  s.nodes = {host(), host()};
  RunningJob r = running(1, 24 * GB, 2);
  r.placement = {Placement{0, 1, {}}, Placement{1, 1, {}}};  // 12 GB on each host
  s.running.push_back(r);
  const auto loads = node_loads(s);
  CHECK(loads[0].placeholders == 2);
  CHECK(loads[1].placeholders == 2);
}

TEST_CASE("placeholders: the planner hook sees running jobs and this pass's starts", "[placeholder]") {
  Snapshot s;
  s.nodes = {host(), host()};
  Job heavy;
  heavy.id = 7;
  heavy.mem_mb = 12 * GB;
  Job heavy2 = heavy;
  heavy2.id = 8;
  Job light;
  light.id = 9;
  light.mem_mb = 1 * GB;
  s.pending = {heavy, heavy2, light};
  PassState st;
  Plan plan;
  CHECK(may_place_now(s, st, plan, heavy, 0, 1));
  Decision d;
  d.action = Action::Start;
  d.job = 7;
  d.slots = 1;
  d.placement = {Placement{0, 1, {}}};
  plan.decisions.push_back(d);  // the planner started the 12 GB job on host 0
  CHECK_FALSE(may_place_now(s, st, plan, heavy2, 0, 1));
  CHECK(may_place_now(s, st, plan, heavy2, 1, 1));
  CHECK(may_place_now(s, st, plan, light, 0, 3));
  // A running heavy job, freed this pass, no longer blocks its host.
  RunningJob r = running(1, 12 * GB, 1);
  r.placement[0].node = 1;
  s.running.push_back(r);
  CHECK_FALSE(may_place_now(s, st, plan, heavy2, 1, 1));
  st.freed.push_back(1);
  CHECK(may_place_now(s, st, plan, heavy2, 1, 1));
}
