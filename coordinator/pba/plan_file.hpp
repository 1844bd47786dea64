// The project plan: projects, members, flows, the weekly allocation calendar,
// service levels (PBA, pba-synopsys-patent.txt), and the NCI grants and queue
// charge factors (nci-pbs-policy.txt) read from one plan file. Format: see
// docs/plan-file.md. Parsing is pure (text in, struct out).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/pba/calendar.hpp"

namespace corral::pba {

// Service level of a project (patent: "velocity SLA" and "throughput SLA").
enum class SlaKind : std::uint8_t { None, Velocity, Throughput };
struct Sla {
  SlaKind kind = SlaKind::None;
  int jobs = 0;        // throughput: this many jobs finished ...
  Time deadline = 0;   // ... by this time (Unix/trace seconds)
};

struct Flow {
  std::string name;
  std::vector<std::string> steps;  // in flow order
};

struct ProjectDef {
  std::string name;
  std::set<std::string> users;   // user names or trace user ids ("12" for u:12)
  std::set<std::string> groups;  // UNIX group names or trace group ids
  std::vector<Flow> flows;
  Sla sla;
  bool has_step(const std::string& step) const;
};

// N job slots for one project in one ISO week, optionally narrowed to a user,
// a UNIX group and/or one flow step (empty: any).
struct Allocation {
  std::string project;
  IsoWeek week;
  int slots = 0;
  std::string user, group, step;
  int line = 0;  // plan-file line (0: made at run time)
  int specificity() const {
    return !user.empty() + !group.empty() + !step.empty();
  }
  bool same_key(const Allocation& o) const {
    return project == o.project && week == o.week && user == o.user && group == o.group &&
           step == o.step;
  }
};

// NCI: service units granted to a project for each period.
struct Grant {
  std::string project;
  double su = 0;
  Time period = 0;  // seconds; 0: the whole run
};

struct ProjectPlan {
  std::vector<ProjectDef> projects;
  std::vector<Allocation> allocations;
  std::vector<Grant> grants;
  std::vector<Queue> queues;  // model.hpp Queue: priority, charge_factor, bounds
  int horizon_weeks = 12;     // how far ahead allocations may be planned

  const ProjectDef* project(const std::string& name) const;
  // Allocations in force during the ISO week containing t.
  std::vector<const Allocation*> allocations_at(Time t) const;
  // Total slots allocated to a project for the week containing t.
  int allocated_slots(const std::string& project, Time t) const;
  // The project tag for a job that has none (trace jobs): the first project,
  // in file order, listing the user (else the group) as a member; "" if none.
  std::string project_of(const std::string& user, const std::string& group) const;
};

struct PlanParseOptions {
  // "Now" for the horizon check and the origin of relative weeks (+N) and
  // relative deadlines (+DURATION): the trace start in the simulator, the
  // current time in live use.
  Time origin = 0;
};

struct PlanParseResult {
  ProjectPlan plan;
  std::vector<std::string> errors;  // "line 7: ..." ; empty when ok
  bool ok() const { return errors.empty(); }
};

// Parses a whole plan file. Every bad line is reported (with its number);
// nothing is silently dropped.
PlanParseResult parse_plan(const std::string& text, const PlanParseOptions& opt = {});

// Run-time change of the calendar (takes effect in the next pass, since the
// plan is data handed to every pass). Replaces an entry with the same key;
// slots = 0 removes it. Returns an error text (and changes nothing) if the
// project or step is unknown, slots < 0, or the week is more than
// plan.horizon_weeks ahead of `now`.
std::optional<std::string> set_allocation(ProjectPlan& plan, Allocation a, Time now);

// The horizon rule alone: an error text if week w lies more than
// `horizon_weeks` weeks after the week containing `now`.
std::optional<std::string> check_horizon(IsoWeek w, Time now, int horizon_weeks);

}  // namespace corral::pba
