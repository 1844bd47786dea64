// NCI's queue table and the checks of a job's mandatory requests against it
// ("Queue structure", "Resource limits").
#include <algorithm>
#include <string>

#include "coordinator/nci/queue_lookup.hpp"

namespace corral {

std::vector<Queue> nci_default_queues() {
  // "Queue structure": relative charge express 3, normal 1, bonus 0. Bounds are
  // the initial defaults ("Resource limits": varied over time and per project).
  Queue express;
  express.name = "express";
  express.priority = 2;
  express.charge_factor = 3.0;
  express.max_walltime = 24 * 3600;
  express.max_cpus = 64;
  Queue normal;
  normal.name = "normal";
  normal.priority = 1;
  normal.charge_factor = 1.0;
  normal.max_walltime = 48 * 3600;
  normal.max_cpus = 1024;
  Queue bonus = normal;
  bonus.name = "bonus";
  bonus.priority = 0;
  bonus.charge_factor = 0.0;
  return {express, normal, bonus};
}

const Queue* nci_find_queue(const std::vector<Queue>& queues, const std::string& name) {
  for (const Queue& q : queues)
    if (q.name == name) return &q;
  return nullptr;
}

void add_lowest_queue(std::vector<Queue>& qs, const std::string& name) {
  if (nci_find_queue(qs, name)) return;
  Queue q;
  q.name = name;
  int minp = 0;
  for (const Queue& o : qs) minp = std::min(minp, o.priority);
  q.priority = minp - 1;
  q.charge_factor = 0;
  qs.push_back(std::move(q));
}

namespace {

std::string bound_error(const char* what, long long v, const Queue& q, long long bound,
                        const char* unit) {
  return std::string(what) + " " + std::to_string(v) + unit + " above queue " + q.name +
         "'s bound of " + std::to_string(bound) + unit;
}

}  // namespace

using nci_detail::queue_name;
using nci_detail::table_of;

NciVerdict validate_request(const Job& job, const std::vector<Queue>& queues, const NciConfig& cfg) {
  NciVerdict v;
  auto fail = [&](std::string r) {
    v.ok = false;
    v.reason = std::move(r);
    return v;
  };
  // "All jobs must have associated requests for the four main limited resources".
  if (cfg.require_walltime && job.walltime <= 0) return fail("walltime missing");
  if (job.walltime < 0) return fail("walltime negative");
  if (job.slots_min < 1) return fail("ncpus missing");
  if (job.slots_max < job.slots_min)
    return fail("ncpus range " + std::to_string(job.slots_min) + "-" +
                std::to_string(job.slots_max) + " is empty");
  if (cfg.require_vmem && job.mem_mb <= 0) return fail("vmem missing");
  if (job.mem_mb < 0) return fail("vmem negative");
  if (cfg.require_jobfs && job.jobfs_mb <= 0) return fail("jobfs missing");
  if (job.jobfs_mb < 0) return fail("jobfs negative");
  const std::string& qn = queue_name(job, cfg);
  const Queue* q = nci_find_queue(table_of(queues, cfg), qn);
  if (!q) return fail("unknown queue " + qn);
  if (q->max_walltime > 0 && job.walltime > q->max_walltime)
    return fail(bound_error("walltime", job.walltime, *q, q->max_walltime, "s"));
  if (q->max_cpus > 0 && job.slots_max > q->max_cpus)
    return fail(bound_error("ncpus", job.slots_max, *q, q->max_cpus, ""));
  if (q->max_mem_mb > 0 && job.mem_mb > q->max_mem_mb)
    return fail(bound_error("vmem", job.mem_mb, *q, q->max_mem_mb, "MB"));
  if (q->max_jobfs_mb > 0 && job.jobfs_mb > q->max_jobfs_mb)
    return fail(bound_error("jobfs", job.jobfs_mb, *q, q->max_jobfs_mb, "MB"));
  return v;
}

}  // namespace corral
