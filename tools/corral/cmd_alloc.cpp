// corral alloc: the PBA allocation calendar week by week up to the plan's horizon, with what
// each project used; corral alloc set PROJECT WEEK SLOTS [WEEK SLOTS...] changes it (root or an
// operator), in a mesh through the coordinator, effective from its next pass.
#include <cstdio>
#include <string>

#include "coordinator/json_text.hpp"
#include "proto/spec_check.hpp"
#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/reply.hpp"

namespace corral::cli {
namespace {

const char* const kAllocHelp =
    "usage: corral alloc [--json]\n"
    "       corral alloc set PROJECT WEEK SLOTS [WEEK SLOTS...] [--json]\n"
    "The project allocation calendar (pba = yes), week by week up to the plan's horizon:\n"
    "slots allocated to each project and what it used (slot-hours, and their average over\n"
    "the part of the week gone). `set` changes a project's slots for ISO weeks (2026-W48),\n"
    "this one or later, within the horizon; 0 removes the allocation. Root or an operator.\n";

void print_calendar(const proto::AllocRep& rep) {
  std::printf("this week %s, horizon %d weeks\n", rep.current_week.c_str(), rep.horizon_weeks);
  std::printf("%-9s %-16s %9s %11s %10s\n", "WEEK", "PROJECT", "ALLOCATED", "USED_SLOTS", "SLOT_HOURS");
  for (const proto::AllocLine& l : rep.weeks)
    std::printf("%-9s %-16.16s %9d %11.2f %10.2f%s\n", l.week.c_str(), proto::printable(l.project).c_str(), l.allocated,
                l.used_slots, l.used_slot_hours, l.week == rep.current_week ? "  (now)" : "");
}

}  // namespace

int cmd_alloc(int argc, char** argv) {
  return guarded("alloc", [&] {
    AllocArgs a = parse_alloc(argc, argv);
    if (a.help) return std::fputs(kAllocHelp, stdout), 0;
    proto::AllocRep rep = expect<proto::AllocRep>(request(a.socket, a.req));
    if (a.json) {
      nlohmann::ordered_json weeks = nlohmann::ordered_json::array();
      for (const auto& l : rep.weeks)
        weeks.push_back({{"week", l.week}, {"project", l.project}, {"allocated", l.allocated},
                         {"used_slots", l.used_slots}, {"used_slot_hours", l.used_slot_hours}});
      nlohmann::ordered_json out = {{"current_week", rep.current_week}, {"horizon_weeks", rep.horizon_weeks}, {"weeks", weeks}};
      std::printf("%s\n", json_text(out).c_str());
    } else {
      print_calendar(rep);
    }
    return 0;
  });
}

}  // namespace corral::cli
