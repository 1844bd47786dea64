// What each project used of its weekly allocation (pba-synopsys-patent.txt: "a certain number
// of job slots ... during a particular week"): the slot-hours its runs held in each ISO week,
// beside the calendar's allocation, as `corral alloc` shows them. Pure: the caller lists the
// runs and gives the time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coordinator/pba/plan_file.hpp"

namespace corral::pba {

// Slots a project held from `start` to `end` (end 0: still held at `now`).
struct SlotUse {
  std::string project;
  int slots = 0;
  Time start = 0;
  Time end = 0;
};

struct WeekUse {
  IsoWeek week;
  std::string project;
  int allocated = 0;       // ProjectPlan::allocated_slots for the week
  double slot_hours = 0;   // held by the project's runs during the week
  double avg_slots = 0;    // slot_hours over the hours of the week gone (0 for a week to come)
};

// The weeks from the earliest one (at most plan.horizon_weeks back) in which a project used
// slots or had an allocation, to plan.horizon_weeks ahead; by week, then project. A row for
// every declared project in the current week; other weeks only where something was allocated
// or used.
std::vector<WeekUse> allocation_calendar(const ProjectPlan& plan, const std::vector<SlotUse>& uses, Time now);

// Lays run-time changes over the plan's calendar: `changes` maps "PROJECT/YYYY-Www" to slots
// (0 removes), as the mesh replicates them. Changes naming an undeclared project or a bad week
// are skipped (they were checked when made).
void overlay_allocations(ProjectPlan& plan, const std::map<std::string, std::int32_t>& changes);

}  // namespace corral::pba
