#include "coordinator/nci/ledger.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace corral {

namespace {
// A grant's project and amount (set_grant, set_grant_every).
void check_grant(const std::string& project, double su) {
  if (project.empty()) throw std::invalid_argument("grant: project name missing");
  if (su < 0) throw std::invalid_argument("grant for project " + project + " is negative");
}

std::int64_t floor_div(Time a, Time b) {
  if (b <= 0) return 0;
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

bool LedgerTotals::operator==(const LedgerTotals& o) const {
  auto same = [](const std::map<Key, LedgerUsage>& a, const std::map<Key, LedgerUsage>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
             return x.first == y.first && x.second.su == y.second.su && x.second.cpu_seconds == y.second.cpu_seconds;
           });
  };
  return latest_at == o.latest_at && grant == o.grant && charged == o.charged &&
         same(project_weeks, o.project_weeks) && same(user_weeks, o.user_weeks) && user_projects == o.user_projects;
}

Time running_seconds(const RunningJob& rj, Time now) {
  return std::max<Time>(now - rj.start - rj.suspended_for, 0);
}

Time charged_seconds(double start, double at, double suspended) {
  const double ran = std::floor(at - start - suspended);
  return ran > 0 ? static_cast<Time>(ran) : 0;
}

double service_units(Time seconds, int cpus, double factor) {
  return static_cast<double>(seconds) * cpus / 3600.0 * factor;
}

Ledger::Ledger(std::vector<Queue> queues, LedgerConfig cfg)
    : queues_(std::move(queues)), cfg_(std::move(cfg)) {}

std::int64_t Ledger::period_of(Time t) const { return floor_div(t - cfg_.period_origin, cfg_.period); }
std::int64_t Ledger::period_of(const std::string& project, Time t) const {
  auto it = recurring_.find(project);
  if (it == recurring_.end()) return period_of(t);
  return it->second.period > 0 ? floor_div(t - cfg_.period_origin, it->second.period) : 0;
}

std::int64_t Ledger::week_of(Time t) const { return floor_div(t - cfg_.week_origin, 7 * 86400); }

void Ledger::set_grant(const std::string& project, double su, Time at) {
  check_grant(project, su);
  t_.grant[{project, period_of(project, at)}] = su;
  t_.latest_at = std::max(t_.latest_at, at);
}

void Ledger::set_grant_every(const std::string& project, double su, Time period) {
  check_grant(project, su);
  if (period < 0) throw std::invalid_argument("grant for project " + project + ": negative period");
  recurring_[project] = {su, period};
}

double Ledger::charge_factor(const Job& job) const {
  const std::string& qn = job.queue.empty() ? cfg_.default_queue : job.queue;
  for (const Queue& x : queues_)
    if (x.name == qn) return x.charge_factor;
  throw std::invalid_argument("charge for job " + std::to_string(job.id) + ": unknown queue " + qn);
}

double Ledger::charge(const Job& job, Time seconds, Time at, int cpus) {
  return charge_at(job, seconds, at, cpus, charge_factor(job));
}

double Ledger::charge_at(const Job& job, Time seconds, Time at, int cpus, double factor) {
  if (seconds < 0)
    throw std::invalid_argument("charge for job " + std::to_string(job.id) + ": negative seconds");
  const int n = cpus > 0 ? cpus : std::max(job.slots_max, job.slots_min);
  const double cpu_s = static_cast<double>(seconds) * n;
  const double su = service_units(seconds, n, factor);
  const std::int64_t p = period_of(job.project, at);
  const std::int64_t w = week_of(at);
  t_.latest_at = std::max(t_.latest_at, at);
  t_.charged[{job.project, p}] += su;
  Usage& pu = t_.project_weeks[{job.project, w}];
  pu.su += su;
  pu.cpu_seconds += cpu_s;
  Usage& uu = t_.user_weeks[{job.user, w}];
  uu.su += su;
  uu.cpu_seconds += cpu_s;
  t_.user_projects[job.user] = job.project;
  return su;
}

double Ledger::charged(const std::string& project, std::int64_t period) const {
  auto it = t_.charged.find({project, period});
  return it == t_.charged.end() ? 0.0 : it->second;
}

double Ledger::granted(const std::string& project, std::int64_t period) const {
  auto it = t_.grant.find({project, period});
  if (it != t_.grant.end()) return it->second;
  auto r = recurring_.find(project);
  return r == recurring_.end() ? 0.0 : r->second.su;
}

bool Ledger::has_grant(const std::string& project, Time at) const {
  return recurring_.count(project) > 0 || t_.grant.count({project, period_of(project, at)}) > 0;
}

double Ledger::grant_left(const std::string& project, Time at) const {
  const std::int64_t p = period_of(project, at);
  return granted(project, p) - charged(project, p);
}

double Ledger::grant_left(const std::string& project) const { return grant_left(project, t_.latest_at); }

std::map<std::string, double> Ledger::grants_left(Time at) const {
  std::map<std::string, double> out;
  for (const auto& [project, r] : recurring_) out[project] = grant_left(project, at);
  for (const auto& [key, su] : t_.grant)
    if (key.second == period_of(key.first, at)) out[key.first] = grant_left(key.first, at);
  return out;
}

}  // namespace corral
