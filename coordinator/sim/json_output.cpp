// The replay's results as JSON (the summary `corral sim` prints) and the
// --starts CSV.
#include "coordinator/sim/sim.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "coordinator/json_text.hpp"

namespace corral::sim {

namespace {

// Figures at 6 significant digits (as %.6g), printed in the shortest form
// that reads back the same.
double six(double v) {
  if (!std::isfinite(v)) return v;  // null in JSON
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return std::strtod(b, nullptr);
}

nlohmann::ordered_json project_json(const ProjectResult& x) {
  return {{"allocated_slots", six(x.allocated_slots)},
          {"allocated_peak", x.allocated_peak},
          {"mean_slots_used", six(x.mean_slots_used)},
          {"jobs", x.jobs},
          {"allocated_jobs", x.allocated_jobs},
          {"mean_wait", six(x.mean_wait)},
          {"max_wait", x.max_wait},
          {"max_wait_past_threshold", std::max<Time>(0, x.max_wait_past_threshold)},
          {"su_charged", six(x.su_charged)},
          {"grant_left", x.has_grant ? nlohmann::ordered_json(six(x.grant_left)) : nlohmann::ordered_json()},
          {"preemptions_suffered", x.preemptions_suffered},
          {"preemptions_caused", x.preemptions_caused}};
}

}  // namespace

std::string to_json(const SimResult& r, const nlohmann::ordered_json& labels) {
  nlohmann::ordered_json o = labels.is_object() ? labels : nlohmann::ordered_json::object();
  o["jobs"] = r.jobs;
  o["finished"] = r.finished;
  o["rejected"] = r.rejected;
  o["unstarted"] = r.unstarted;
  o["utilization"] = six(r.utilization);
  o["mean_wait"] = six(r.mean_wait);
  o["max_wait"] = r.max_wait;
  o["p99_wait"] = r.p99_wait;
  o["mean_bsld"] = six(r.mean_bsld);
  o["max_bsld"] = six(r.max_bsld);
  o["makespan"] = r.makespan;
  o["preemptions"] = r.preemptions;
  o["checkpoints"] = r.checkpoints;
  o["checkpoint_cost_total"] = r.checkpoint_cost_total;
  o["idle_core_seconds_waiting"] = six(r.idle_while_waiting);
  o["jobs_checkpointable"] = r.jobs_checkpointable;
  o["jobs_checkpointed"] = r.jobs_checkpointed;
  o["checkpoint_seconds"] = r.checkpoint_seconds;
  o["restart_cost_total"] = r.restart_cost_total;
  o["deferred_starts"] = r.deferred_starts;
  o["passes"] = r.passes;
  o["skipped_passes"] = r.skipped_passes;
  o["machine_procs"] = r.machine_procs;
  o["sim_seconds"] = six(r.sim_seconds);
  if (r.has_projects) {
    o["pending_threshold"] = r.pending_threshold;
    if (r.start_window > 0) {
      o["start_window"] = r.start_window;
      o["window_bound"] = r.window_bound;
      o["jobs_past_window"] = r.jobs_past_window;
      o["max_wait_past_window"] = r.max_wait_past_window;
      o["window_narrow_procs"] = r.window_narrow_procs;
      o["narrow_jobs_past_window"] = r.narrow_jobs_past_window;
      o["max_wait_past_window_narrow"] = r.max_wait_past_window_narrow;
      o["window_quantum"] = r.window_bound - r.start_window;
      o["max_suspension"] = r.max_suspension;
    }
    nlohmann::ordered_json p = nlohmann::ordered_json::object();
    for (const ProjectResult& x : r.projects) p[x.name] = project_json(x);
    o["projects"] = std::move(p);
  }
  return json_text(o);
}

std::string starts_csv(const SimResult& r) {
  std::string o;
  o.reserve(r.per_job.size() * 16);
  for (const JobResult& j : r.per_job) {
    o += std::to_string(j.id);
    o += ',';
    o += std::to_string(j.first_start);
    o += '\n';
  }
  return o;
}

}  // namespace corral::sim
