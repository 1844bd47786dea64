// Service-unit accounting (nci-pbs-policy.txt "Charging"): a job is charged
// the wallclock time it spent in the running state x the cpus it requested x
// its queue's charge factor (express 3, normal 1, bonus 0). Suspended time is
// not charged. Projects have grants per period; a project with no grant left
// runs only in the bonus queue (NciConfig::grant_left, filled from here).
//
// The Ledger is plain data the caller keeps (the agent, the simulator); it has
// no clock: every call carries the time it applies to.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coordinator/model.hpp"

namespace corral {

struct LedgerConfig {
  Time period = 13 * 7 * 86400;  // grant period (a quarter by default)
  Time period_origin = 0;        // start of period 0 (caller's epoch)
  Time week_origin = 0;          // start of week 0, for reports
  std::string default_queue = "normal";
};

// Seconds a job has spent in the running state by `now` (suspended time off).
Time running_seconds(const RunningJob& rj, Time now);

// The whole running seconds a run is charged for from `start` to `at`, `suspended` of them
// frozen (never negative): a standalone agent and the mesh's state charge runs by this.
Time charged_seconds(double start, double at, double suspended);
// Service units of `seconds` of running on `cpus` at charge factor `factor` (per cpu-hour).
double service_units(Time seconds, int cpus, double factor);

struct LedgerUsage {
  double su = 0;            // service units charged
  double cpu_seconds = 0;   // running seconds x cpus (any queue, bonus too)
};

// Everything a Ledger has recorded (explicit grants and charges) as plain
// data, so that a caller keeping the ledger across restarts (corrald) can save
// it and hand it back. Recurring grants are configuration, not records.
struct LedgerTotals {
  using Key = std::pair<std::string, std::int64_t>;  // (project or user, period or week)
  Time latest_at = 0;
  std::map<Key, double> grant;    // project, period (set_grant)
  std::map<Key, double> charged;  // project, period
  std::map<Key, LedgerUsage> project_weeks, user_weeks;
  std::map<std::string, std::string> user_projects;  // last project seen
  bool operator==(const LedgerTotals&) const;
};

class Ledger {
 public:
  // Charge factors come from the queue table (Queue::charge_factor).
  explicit Ledger(std::vector<Queue> queues, LedgerConfig cfg = {});

  std::int64_t period_of(Time t) const;
  // The period index of `t` for a project (its own period length if it has a
  // recurring grant, else LedgerConfig::period).
  std::int64_t period_of(const std::string& project, Time t) const;
  std::int64_t week_of(Time t) const;
  Time week_start(std::int64_t week) const { return cfg_.week_origin + week * 7 * 86400; }

  // Grant of `su` service units to `project` for the period containing `at`.
  void set_grant(const std::string& project, double su, Time at);
  // A grant renewed every `period` seconds from LedgerConfig::period_origin
  // (0: one grant for the whole run), e.g. the plan file's
  // `grant PROJECT SU period=quarter` (pba/plan_file.hpp Grant). An explicit
  // set_grant for a period overrides it there.
  void set_grant_every(const std::string& project, double su, Time period);

  // Charges `seconds` of running time of `job`, accounted at time `at` (period
  // and week). `cpus` 0: the job's request (slots_max). Returns the SUs
  // charged. Throws std::invalid_argument (clear message) on an unknown queue
  // or negative seconds; nothing is recorded then.
  double charge(const Job& job, Time seconds, Time at, int cpus = 0);
  // The charge factor of the job's queue (throws as charge() on an unknown one).
  double charge_factor(const Job& job) const;
  // Same as charge(), at an explicit charge factor (a replay of charges recorded earlier).
  double charge_at(const Job& job, Time seconds, Time at, int cpus, double factor);

  // SUs left of the project's grant in the period containing `at` (0 when it
  // has no grant; may be negative after overrun).
  double grant_left(const std::string& project, Time at) const;
  // Same, for the latest period the ledger has seen (grant or charge).
  double grant_left(const std::string& project) const;
  bool has_grant(const std::string& project, Time at) const;

  // For NciConfig::grant_left: every project with a grant in `at`'s period.
  std::map<std::string, double> grants_left(Time at) const;

  using Usage = LedgerUsage;
  // Per (project, week) and (user, week).
  const std::map<std::pair<std::string, std::int64_t>, Usage>& project_weeks() const { return t_.project_weeks; }
  const std::map<std::pair<std::string, std::int64_t>, Usage>& user_weeks() const { return t_.user_weeks; }
  const std::map<std::string, std::string>& user_projects() const { return t_.user_projects; }
  double charged(const std::string& project, std::int64_t period) const;
  double granted(const std::string& project, std::int64_t period) const;

  // What was recorded, and the same handed back (a restart): recurring
  // grants, the queues and the configuration stay as constructed.
  const LedgerTotals& totals() const { return t_; }
  void restore(LedgerTotals t) { t_ = std::move(t); }
  const LedgerConfig& config() const { return cfg_; }

 private:
  std::vector<Queue> queues_;
  LedgerConfig cfg_;
  struct Recurring {
    double su = 0;
    Time period = 0;
  };
  std::map<std::string, Recurring> recurring_;
  LedgerTotals t_;
};

}  // namespace corral
