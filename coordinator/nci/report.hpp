// Per-project and per-user weekly reports (allocation, slots used, over- or
// under-subscription, pending jobs, service units charged, grant left).
// Pure: build from data, render to a string; the simulator and the agent print.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/nci/ledger.hpp"

namespace corral {

struct ReportRow {
  std::string project;
  std::string user;           // empty on project rows
  double allocation = 0;      // slots allocated for the week (0: none)
  double slots_used = 0;      // mean cpus in use over the week (so far)
  int running_cpus = 0;       // cpus of its running jobs now (suspended excluded)
  double subscription = 0;    // slots_used - allocation: > 0 over, < 0 under
  int pending_jobs = 0;
  double su_charged = 0;      // this week
  double grant_left = 0;      // the project's grant left in the period
  bool has_grant = false;
};

struct NciReport {
  std::int64_t week = 0;
  Time at = 0;
  std::vector<ReportRow> projects;  // sorted by project
  std::vector<ReportRow> users;     // sorted by user
};

// `allocation`: slots per project for the week (e.g. from the PBA calendar);
// `user_allocation` likewise per user (may be empty).
NciReport build_report(const Ledger& ledger, const Snapshot& snap, std::int64_t week,
                       const std::map<std::string, double>& allocation = {},
                       const std::map<std::string, double>& user_allocation = {});

std::string render_report_table(const NciReport& r);
std::string render_report_json(const NciReport& r);

}  // namespace corral
