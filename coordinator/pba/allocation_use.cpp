#include "coordinator/pba/allocation_use.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace corral::pba {

std::vector<WeekUse> allocation_calendar(const ProjectPlan& plan, const std::vector<SlotUse>& uses, Time now) {
  const long long current = week_index(now), first_allowed = current - plan.horizon_weeks;
  const IsoWeek now_week = iso_week(now);
  std::map<std::pair<long long, std::string>, double> held;  // (week index, project) -> slot-seconds
  for (const SlotUse& u : uses) {
    const Time end = u.end > 0 ? u.end : now;
    if (u.slots <= 0 || end <= u.start) continue;
    for (long long w = std::max(week_index(u.start), first_allowed); w <= week_index(end - 1); ++w) {
      const Time ws = week_start(add_weeks(now_week, w - current));
      const Time from = std::max(u.start, ws), to = std::min(end, ws + kWeek);
      if (to > from) held[{w, u.project}] += static_cast<double>(to - from) * u.slots;
    }
  }
  std::set<std::pair<long long, std::string>> rows;
  for (const auto& [key, s] : held) rows.insert(key);
  for (const Allocation& a : plan.allocations) {
    const long long w = week_index(a.week);
    if (w >= first_allowed && w <= current + plan.horizon_weeks && a.slots > 0) rows.insert({w, a.project});
  }
  for (const ProjectDef& p : plan.projects) rows.insert({current, p.name});
  std::vector<WeekUse> out;
  for (const auto& [w, project] : rows) {
    WeekUse r;
    r.week = add_weeks(now_week, w - current);
    r.project = project;
    const Time ws = week_start(r.week);
    r.allocated = plan.allocated_slots(project, ws);
    if (auto it = held.find({w, project}); it != held.end()) {
      r.slot_hours = it->second / 3600.0;
      const Time gone = std::min(now, ws + kWeek) - ws;
      if (gone > 0) r.avg_slots = it->second / static_cast<double>(gone);
    }
    out.push_back(std::move(r));
  }
  return out;
}

void overlay_allocations(ProjectPlan& plan, const std::map<std::string, std::int32_t>& changes) {
  for (const auto& [key, slots] : changes) {
    const auto slash = key.rfind('/');
    if (slash == std::string::npos) continue;
    auto week = parse_iso_week(key.substr(slash + 1));
    if (!week) continue;
    Allocation a;
    a.project = key.substr(0, slash);
    a.week = *week;
    a.slots = slots;
    (void)set_allocation(plan, std::move(a), week_start(*week));  // the horizon was checked when set
  }
}

}  // namespace corral::pba
