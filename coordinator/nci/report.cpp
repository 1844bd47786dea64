#include "coordinator/nci/report.hpp"
#include "coordinator/nci/nci.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

namespace corral {

namespace {

std::string fmt(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// A figure at 2 decimals (as the table prints it).
double two(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.2f", v);
  return std::strtod(b, nullptr);
}

}  // namespace

NciReport build_report(const Ledger& ledger, const Snapshot& snap, std::int64_t week,
                       const std::map<std::string, double>& allocation,
                       const std::map<std::string, double>& user_allocation) {
  NciReport r;
  r.week = week;
  r.at = snap.now;
  const Time ws = ledger.week_start(week);
  constexpr Time kWeek = 7 * 86400;
  // A week in progress is averaged over its elapsed part.
  const Time span = (snap.now > ws && snap.now < ws + kWeek) ? snap.now - ws : kWeek;
  const Time at = std::clamp<Time>(snap.now, ws, ws + kWeek - 1);

  std::map<std::string, ReportRow> proj, user;
  auto prow = [&](const std::string& p) -> ReportRow& {
    ReportRow& x = proj[p];
    x.project = p;
    return x;
  };
  auto urow = [&](const std::string& u, const std::string& p) -> ReportRow& {
    ReportRow& x = user[u];
    x.user = u;
    if (x.project.empty()) x.project = p;
    return x;
  };
  for (const auto& [key, use] : ledger.project_weeks())
    if (key.second == week) {
      ReportRow& x = prow(key.first);
      x.su_charged += use.su;
      x.slots_used += use.cpu_seconds / static_cast<double>(span);
    }
  for (const auto& [key, use] : ledger.user_weeks())
    if (key.second == week) {
      auto it = ledger.user_projects().find(key.first);
      ReportRow& x = urow(key.first, it == ledger.user_projects().end() ? "" : it->second);
      x.su_charged += use.su;
      x.slots_used += use.cpu_seconds / static_cast<double>(span);
    }
  for (const RunningJob& rj : snap.running) {
    const int c = rj.suspended ? 0 : held_cpus(rj);
    prow(rj.job.project).running_cpus += c;
    urow(rj.job.user, rj.job.project).running_cpus += c;
  }
  for (const Job& j : snap.pending) {
    prow(j.project).pending_jobs++;
    urow(j.user, j.project).pending_jobs++;
  }
  for (const auto& [p, a] : allocation) prow(p).allocation = a;
  for (const auto& [u, a] : user_allocation) urow(u, "").allocation = a;
  for (auto& [p, x] : proj) {
    x.has_grant = ledger.has_grant(p, at);
    x.grant_left = ledger.grant_left(p, at);
    x.subscription = x.slots_used - x.allocation;
    r.projects.push_back(x);
  }
  for (auto& [u, x] : user) {
    x.has_grant = !x.project.empty() && ledger.has_grant(x.project, at);
    x.grant_left = x.project.empty() ? 0.0 : ledger.grant_left(x.project, at);
    x.subscription = x.slots_used - x.allocation;
    r.users.push_back(x);
  }
  return r;
}

std::string render_report_table(const NciReport& r) {
  std::string out = "week " + std::to_string(r.week) + " at " + std::to_string(r.at) + "\n";
  auto section = [&](const char* title, const std::vector<ReportRow>& rows, bool users) {
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> head = {users ? "user" : "project"};
    if (users) head.push_back("project");
    for (const char* h : {"alloc", "used", "running", "over/under", "pending", "SU", "grant left"})
      head.push_back(h);
    cells.push_back(head);
    for (const ReportRow& x : rows) {
      std::vector<std::string> c = {users ? x.user : x.project};
      if (users) c.push_back(x.project);
      char sub[48];
      std::snprintf(sub, sizeof sub, "%+.2f", x.subscription);
      for (std::string v : {fmt(x.allocation), fmt(x.slots_used), std::to_string(x.running_cpus),
                            std::string(sub), std::to_string(x.pending_jobs), fmt(x.su_charged),
                            x.has_grant ? fmt(x.grant_left) : std::string("-")})
        c.push_back(std::move(v));
      cells.push_back(std::move(c));
    }
    std::vector<std::size_t> w(head.size(), 0);
    for (const auto& row : cells)
      for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
    out += title;
    out += "\n";
    for (const auto& row : cells) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        const std::size_t pad = w[i] - row[i].size();
        // Names left-aligned, figures right-aligned.
        const bool name = i == 0 || (users && i == 1);
        if (i) line += "  ";
        line += name ? row[i] + std::string(pad, ' ') : std::string(pad, ' ') + row[i];
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
  };
  section("projects", r.projects, false);
  section("users", r.users, true);
  return out;
}

std::string render_report_json(const NciReport& r) {
  auto row = [](const ReportRow& x, bool users) {
    nlohmann::ordered_json o;
    if (users) o["user"] = x.user;
    o["project"] = x.project;
    o["allocation"] = two(x.allocation);
    o["slots_used"] = two(x.slots_used);
    o["running_cpus"] = x.running_cpus;
    o["subscription"] = two(x.subscription);
    o["pending_jobs"] = x.pending_jobs;
    o["su_charged"] = two(x.su_charged);
    o["grant_left"] = x.has_grant ? nlohmann::ordered_json(two(x.grant_left)) : nlohmann::ordered_json();
    return o;
  };
  nlohmann::ordered_json o = {{"week", r.week}, {"at", r.at}};
  o["projects"] = nlohmann::ordered_json::array();
  for (const ReportRow& x : r.projects) o["projects"].push_back(row(x, false));
  o["users"] = nlohmann::ordered_json::array();
  for (const ReportRow& x : r.users) o["users"].push_back(row(x, true));
  return o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace corral
