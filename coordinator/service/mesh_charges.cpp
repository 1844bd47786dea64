#include "coordinator/service/mesh_charges.hpp"

#include <algorithm>
#include <cmath>

#include "coordinator/service/spec_job.hpp"

namespace corral::service {

namespace {

constexpr std::int64_t kWeek = 7 * 86400;
constexpr std::int64_t kFirstMonday = 4 * 86400;  // 1970-01-05 00:00 UTC

bool running(const MeshJob& j) { return j.state == proto::state::kRunning || j.state == proto::state::kSuspended; }

// Seconds the run has been frozen by `now`, an ongoing suspension included.
double suspended_by(const MeshRun& r, Time now) {
  return r.suspended_s + (r.suspended_since > 0 ? std::max(0.0, static_cast<double>(now) - r.suspended_since) : 0.0);
}

}  // namespace

int run_cpus(const MeshJob& j, const MeshRun& r) {
  if (!r.slots.empty() && r.slots.size() == r.nodes.size()) {
    int n = 0;
    for (std::int32_t s : r.slots) n += s;
    return n;
  }
  return slot_range(j.spec).first;
}

std::int64_t week_monday(double t) {
  const auto s = static_cast<std::int64_t>(std::floor(t)) - kFirstMonday;
  return (s >= 0 ? s / kWeek : -((-s + kWeek - 1) / kWeek)) * kWeek + kFirstMonday;
}

double run_su(const MeshJob& j, const MeshRun& r, Time now) {
  if (r.charged_s >= 0) return r.su;
  if (!running(j) || &r != &j.runs.back()) return 0;
  return service_units(charged_seconds(r.start, static_cast<double>(now), suspended_by(r, now)), run_cpus(j, r),
                       r.charge);
}

double job_su(const MeshJob& j, Time now) {
  double su = 0;
  for (const MeshRun& r : j.runs) su += run_su(j, r, now);
  return su;
}

double job_su_rate(const MeshJob& j) {
  if (!running(j)) return 0;
  return service_units(3600, run_cpus(j, j.runs.back()), j.runs.back().charge);
}

Ledger mesh_ledger(const MeshData& d, Time now) {
  LedgerConfig cfg;
  cfg.period_origin = cfg.week_origin = d.charge_origin != 0 ? d.charge_origin : week_monday(static_cast<double>(now));
  Ledger l({}, cfg);
  for (const auto& [project, g] : d.grants) l.set_grant_every(project, g.su, g.every);
  for (const auto& [id, m] : d.jobs) {
    Job job;
    job.id = id;
    job.user = m.user;
    job.project = m.spec.project;
    job.queue = m.spec.queue;
    for (const MeshRun& r : m.runs) {
      const int cpus = run_cpus(m, r);
      if (r.charged_s >= 0) {
        l.charge_at(job, r.charged_s, static_cast<Time>(r.end), cpus, r.charge);
      } else if (running(m) && &r == &m.runs.back()) {
        l.charge_at(job, charged_seconds(r.start, static_cast<double>(now), suspended_by(r, now)), now, cpus, r.charge);
      }
    }
  }
  return l;
}

}  // namespace corral::service
