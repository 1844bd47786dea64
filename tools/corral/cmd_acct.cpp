// corral acct: every ended job and its runs (as Slurm's sacct), with --user, --project and
// --since filters and --json. corrald reads them from its journal (standalone) or from the
// mesh's replicated state, so they survive a coordinator's loss.
#include <ctime>
#include <cstdio>
#include <string>

#include "coordinator/json_text.hpp"
#include "proto/spec_check.hpp"
#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/reply.hpp"

namespace corral::cli {
namespace {

using Json = nlohmann::ordered_json;

const char* const kAcctHelp =
    "usage: corral acct [--user U] [--project P] [--since T] [--json]\n"
    "Every ended job and each of its runs (JOBID.RUN): name, user, project, queue, nodes,\n"
    "submit/start/end, runs, end reason, exit code, cpus and service units charged.\n"
    "  --since T  jobs that ended at most T ago (3600, 90s, 30m, 12h, 7d, 2w) or since the\n"
    "             start of an ISO week (2026-W48)\n";

std::string date_time(double t) { return local_time(t, "%Y-%m-%dT%H:%M:%S"); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + proto::printable(x);
  return s.empty() ? "-" : s;
}

Json run_json(const proto::AcctRun& r) {
  return Json{{"run", r.run},   {"nodes", r.nodes},           {"start", r.start},
              {"end", r.end},   {"end_reason", r.end_reason}, {"exit_code", r.exit_code}};
}

Json acct_row(const proto::AcctJob& j) {
  Json runs = Json::array();
  for (const auto& r : j.runs) runs.push_back(run_json(r));
  return Json{{"id", j.id},           {"name", j.name},
              {"user", j.user},       {"project", j.project},
              {"queue", j.queue},     {"nodes", j.nodes},
              {"submit", j.submit},   {"start", j.start},
              {"end", j.end},         {"run_count", j.runs.size()},
              {"end_reason", j.end_reason}, {"exit_code", j.exit_code},
              {"cpus", j.cpus},       {"su_charged", j.su_charged},
              {"runs", runs}};
}

void print_acct(const std::vector<proto::AcctJob>& jobs) {
  const char* row = "%-10s %-12.12s %-8.8s %-8.8s %-8.8s %-12.12s %-19s %-19s %-19s %4s %-10s %4s %4s %8s\n";
  std::printf(row, "JOBID", "NAME", "USER", "PROJECT", "QUEUE", "NODES", "SUBMIT", "START", "END", "RUNS", "REASON",
              "EXIT", "CPUS", "SU");
  for (const proto::AcctJob& j : jobs) {
    char su[32];
    std::snprintf(su, sizeof su, "%.2f", j.su_charged);
    std::printf(row, std::to_string(j.id).c_str(), proto::printable(j.name).c_str(), proto::printable(j.user).c_str(),
                j.project.empty() ? "-" : proto::printable(j.project).c_str(), proto::printable(j.queue).c_str(),
                joined(j.nodes).c_str(), date_time(j.submit).c_str(), date_time(j.start).c_str(),
                date_time(j.end).c_str(), std::to_string(j.runs.size()).c_str(), j.end_reason.c_str(),
                std::to_string(j.exit_code).c_str(), std::to_string(j.cpus).c_str(), su);
    for (const proto::AcctRun& r : j.runs)
      std::printf(row, (std::to_string(j.id) + "." + std::to_string(r.run)).c_str(), "", "", "", "",
                  joined(r.nodes).c_str(), "", date_time(r.start).c_str(), date_time(r.end).c_str(), "",
                  r.end_reason.c_str(), std::to_string(r.exit_code).c_str(), "", "");
  }
}

}  // namespace

int cmd_acct(int argc, char** argv) {
  return guarded("acct", [&] {
    AcctArgs a = parse_acct(argc, argv);
    if (a.help) return std::fputs(kAcctHelp, stdout), 0;
    proto::AcctRep rep = expect<proto::AcctRep>(request(a.socket, a.req));
    if (a.json) {
      Json out = Json::array();
      for (const auto& j : rep.jobs) out.push_back(acct_row(j));
      std::printf("%s\n", json_text(out).c_str());
    } else {
      print_acct(rep.jobs);
    }
    return 0;
  });
}

}  // namespace corral::cli
