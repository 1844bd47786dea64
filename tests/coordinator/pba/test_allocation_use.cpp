#include <catch2/catch.hpp>

#include "coordinator/pba/allocation_use.hpp"

using namespace corral;
using namespace corral::pba;

namespace {

ProjectPlan two_projects() {
  ProjectPlan p;
  p.projects.push_back(ProjectDef{"chip", {"alice"}, {}, {}, {}});
  p.projects.push_back(ProjectDef{"soc", {"bob"}, {}, {}, {}});
  p.horizon_weeks = 4;
  return p;
}

const WeekUse* find_row(const std::vector<WeekUse>& rows, IsoWeek w, const std::string& project) {
  for (const WeekUse& r : rows)
    if (r.week == w && r.project == project) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("allocation_calendar: slot-hours split at week boundaries, averaged over the week gone", "[calendar]") {
  ProjectPlan plan = two_projects();
  const IsoWeek w48{2026, 48};
  const Time monday = week_start(w48);
  const Time now = monday + 2 * kDay;  // Wednesday 00:00
  Allocation a;
  a.project = "chip";
  a.week = w48;
  a.slots = 4;
  REQUIRE_FALSE(set_allocation(plan, a, now));
  a.week = add_weeks(w48, 2);
  a.slots = 6;
  REQUIRE_FALSE(set_allocation(plan, a, now));
  // chip: 2 slots from Sunday 12:00 of week 47 to Monday 12:00 of 48; 1 slot running since Tuesday.
  std::vector<SlotUse> uses = {{"chip", 2, monday - 12 * 3600, monday + 12 * 3600},
                               {"chip", 1, monday + kDay, 0},
                               {"", 1, monday, monday + 3600}};
  std::vector<WeekUse> rows = allocation_calendar(plan, uses, now);
  const WeekUse* now_chip = find_row(rows, w48, "chip");
  REQUIRE(now_chip);
  CHECK(now_chip->allocated == 4);
  CHECK(now_chip->slot_hours == Approx(2 * 12 + 24));
  CHECK(now_chip->avg_slots == Approx(48.0 / 48.0));
  const WeekUse* last = find_row(rows, add_weeks(w48, -1), "chip");
  REQUIRE(last);
  CHECK(last->slot_hours == Approx(24));
  CHECK(last->avg_slots == Approx(24.0 / (7 * 24)));
  REQUIRE(find_row(rows, w48, "soc"));                  // every project this week
  CHECK(find_row(rows, w48, "soc")->slot_hours == 0);
  CHECK(find_row(rows, add_weeks(w48, 1), "chip") == nullptr);  // nothing then
  const WeekUse* later = find_row(rows, add_weeks(w48, 2), "chip");
  REQUIRE(later);
  CHECK(later->allocated == 6);
  CHECK(later->avg_slots == 0);
}

TEST_CASE("overlay_allocations: replicated changes replace, add and remove plan allocations", "[calendar]") {
  ProjectPlan plan = two_projects();
  const IsoWeek w{2026, 48};
  Allocation a;
  a.project = "chip";
  a.week = w;
  a.slots = 4;
  REQUIRE_FALSE(set_allocation(plan, a, week_start(w)));
  overlay_allocations(plan, {{"chip/2026-W48", 0}, {"soc/2026-W48", 3}, {"nosuch/2026-W48", 2}, {"soc/bad", 1}});
  CHECK(plan.allocated_slots("chip", week_start(w)) == 0);
  CHECK(plan.allocated_slots("soc", week_start(w)) == 3);
  CHECK(plan.allocations.size() == 1);
}
