// corral submit / stat / cancel / wait / node / suspend / resume / requeue /
// checkpoint / report: talk to corrald on its local
// socket (tools/corral/client.hpp). Exit codes: 0 ok; 1 corrald refused or
// cannot be reached; 2 bad usage; `wait` exits with the job's exit code.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/reply.hpp"
#include "proto/spec_check.hpp"

extern char** environ;

namespace corral::cli {
namespace {

const char* const kSubmitHelp =
    "usage: corral submit [-l walltime=HH:MM:SS,ncpus=N,mem=4gb,jobfs=1gb] [-q QUEUE]\n"
    "                     [-P PROJECT[:STEP]] [-N NAME] [-o FILE] [-e FILE] [-R y|n] [-now y|n]\n"
    "                     [-pe NAME RANGE] [--preempt requeue|suspend] [-c] [-j oe] [-cwd]\n"
    "                     [-W depend=TYPE:ID[:ID...]] [-hold_jid ID[,ID...]] [--socket PATH]\n"
    "                     [-J FIRST-LAST[:STEP][%MAX] | -t FIRST-LAST[:STEP] [-tc MAX]]\n"
    "                     (SCRIPT | - | --wrap 'COMMAND')\n"
    "Prints the new job's id. The job keeps your environment and working directory.\n"
    "-pe NAME RANGE: a parallel environment slot range, as Grid Engine's qsub: n-m, n,\n"
    "  -m (1-m) or n- (n up to the node's cores); the job gets the largest count it can\n"
    "  have at its earliest start (CORRAL_NCPUS/NSLOTS say how many). Not with ncpus=.\n"
    "-P PROJECT:STEP: the step of one of the project's flows (checked against the plan).\n"
    "-now y: start at once or not at all (never reserved); refused when it cannot start.\n"
    "-c, --checkpointable: the scheduler may checkpoint the job (checkpoint backfilling,\n"
    "  selective preemption); it must save its state on the checkpoint signal.\n"
    "--preempt: how a policy that preempts the job stops it; else $CORRAL_PREEMPT, else\n"
    "  the node's preempt_mode.\n"
    "-j oe: stderr into the stdout file. -cwd: run here (every job does).\n"
    "-W depend=afterok|afterany|afternotok:ID[:ID...], -hold_jid ID[,ID...]: wait for\n"
    "  those jobs; a dependency that can never be met ends the job dependency_never_met.\n"
    "A script's '#CORRAL', '#PBS' and '#$' lines before its first command are read as\n"
    "  options (the same ones; -l also takes h_rt=, h_vmem= and wd); the command line\n"
    "  wins over them. One Corral does not know is an error naming its line.\n"
    "-J FIRST-LAST[:STEP][%MAX] (PBS), -t FIRST-LAST[:STEP] and -tc MAX (Grid Engine):\n"
    "  a job array; task i runs the script with CORRAL_ARRAY_INDEX, PBS_ARRAY_INDEX and\n"
    "  SGE_TASK_ID set to i, at most MAX tasks at once. Prints the array's id; ID[i]\n"
    "  names task i in stat, cancel, hold, release and wait.\n";
const char* const kStatHelp =
    "usage: corral stat [JOBID | -u USER -P PROJECT -s STATE[,STATE] --mine] [-t] [--json] [--socket PATH]\n"
    "With JOBID and --json: one JSON object (with -t an array); without JOBID: an array.\n"
    "A job array is one line (ID[]) with how many of its tasks are in each state;\n"
    "  -t, --tasks  also each of its tasks handed to the scheduler (ID[INDEX]);\n"
    "  JOBID 'ID[INDEX]' names one task.\n"
    "  -u USER     jobs of USER (a name or a uid)\n"
    "  -P PROJECT  jobs of PROJECT\n"
    "  -s STATE    jobs in these states: pending, running, suspended, ended\n"
    "  --mine      your own jobs\n"
    "A pending job shows why it waits (dependency, resources, reservation, allocation,\n"
    "priority) and, when the last pass planned it, its planned start.\n";
const char* const kCancelHelp =
    "usage: corral cancel JOBID... [--socket PATH]\n"
    "A job array's ID cancels every task not ended; ID[INDEX] one task.\n";
const char* const kWaitHelp =
    "usage: corral wait JOBID [--socket PATH]\n"
    "Blocks until the job ends; exits with its exit code (1 if it never ran).\n"
    "A job array ends when every task has: exit 0 when all completed, else 1.\n";
const char* const kNodeHelp =
    "usage: corral node [--json] [--socket PATH]\n"
    "This node's status from its own corrald (no mesh needed).\n";
const char* const kReportHelp =
    "usage: corral report [--week W] [--project P] [--json] [--socket PATH]\n"
    "The weekly per-project and per-user report of NCI charging (corrald with nci = yes),\n"
    "as `corral sim --report` writes each week: allocation, slots used, running cpus,\n"
    "over/under-subscription, pending jobs, service units charged, grant left.\n"
    "  --week W     a week number as the report prints it (0: the week charging began)\n"
    "               or an ISO week such as 2026-W48; default: this week. A past week\n"
    "               shows its charges (no running or pending jobs)\n"
    "  --project P  only project P and its users\n"
    "  --json       the report as `corral sim --report-json` writes a week\n";
// %s: the command (suspend, resume, requeue or checkpoint).
const char* const kControlHelp =
    "usage: corral %s JOBID... [--socket PATH]\n"
    "  suspend     freeze a running job (its cores go to other jobs, memory stays held;\n"
    "              walltime stops); it stays suspended until `corral resume` (root only)\n"
    "  resume      thaw a suspended job on its own cores (root only; refused while\n"
    "              other jobs run on them)\n"
    "  requeue     stop a running job and put it back in the queue (owner or root)\n"
    "  checkpoint  signal the job to checkpoint (SIGUSR1 into CORRAL_CKPT_DIR), stop\n"
    "              it and requeue it with CORRAL_RESTART=1 (owner or root)\n";

int help(const char* text) {
  std::fputs(text, stdout);
  return 0;
}

std::string hms(std::int64_t s, bool zero_ok = false) {
  if (s < 0 || (s == 0 && !zero_ok)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%02lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return b;
}


std::string cores_text(const std::vector<int>& v) {
  std::string s;
  for (int c : v) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s.empty() ? "-" : s;
}

// "reason: comment", without repeating the reason when the comment starts with it; for a
// pending job why it waits and its planned start.
std::string why_text(const proto::JobInfo& j) {
  if (!j.wait_reason.empty())
    return j.wait_reason + (j.wait_detail.empty() ? "" : ": " + j.wait_detail) +
           (j.planned_start > 0 ? "; planned start " + clock_time(j.planned_start) : "");
  if (j.end_reason.empty()) return j.comment;
  if (j.comment.empty()) return j.end_reason;
  if (j.comment.rfind(j.end_reason, 0) == 0) return j.comment;
  return j.end_reason + ": " + j.comment;
}

// An array's range and its tasks' states, or "" for any other job.
std::string array_text(const proto::JobInfo& j) {
  if (!j.array.on() || j.array_id) return "";
  const proto::ArrayCounts& n = j.array_counts;
  std::string t = "tasks " + std::to_string(j.array.first) + "-" + std::to_string(j.array.last);
  if (j.array.step > 1) t += ":" + std::to_string(j.array.step);
  if (j.array.max_running > 0) t += "%" + std::to_string(j.array.max_running);
  t += ": " + std::to_string(n.queued) + " queued, " + std::to_string(n.pending) + " pending, " +
       std::to_string(n.running) + " running, " + std::to_string(n.ended) + " ended";
  if (n.failed) t += " (" + std::to_string(n.failed) + " not completed)";
  return t;
}

// "42", "42[]" (an array) or "42[7]" (one of its tasks).
std::string id_text(const proto::JobInfo& j) {
  if (j.array_id) return job_ref_text(j.array_id, j.array_index);
  return std::to_string(j.id) + (j.array.on() ? "[]" : "");
}

// Service units charged: "-" when none are (no NCI charging, or not run yet).
std::string su_text(const proto::JobInfo& j) {
  if (j.su_charged <= 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, j.su_charged < 10 ? "%.3f" : "%.1f", j.su_charged);
  return b;
}

void print_table(const std::vector<proto::JobInfo>& jobs) {
  std::printf("%-8s %-16s %-10s %-9s %-8s %5s %9s %8s %5s %s\n", "ID", "NAME", "USER", "STATE",
              "QUEUE", "NCPUS", "WALLTIME", "SU", "EXIT", "REASON / COMMENT");
  for (const auto& j : jobs) {
    std::string exitc = j.state == "ended" && j.exit_code >= 0 ? std::to_string(j.exit_code) : "-";
    // Escaped: a name or comment cannot break the table (one job, one line).
    const std::string tasks = array_text(j), comment = why_text(j);
    std::string why = proto::printable(tasks.empty() ? comment : comment.empty() ? tasks : tasks + "; " + comment);
    std::string name = proto::printable(j.name);
    std::printf("%-8s %-16.16s %-10.10s %-9s %-8.8s %5d %9s %8s %5s %s\n", id_text(j).c_str(), name.c_str(), proto::printable(j.user).c_str(),
                j.state.c_str(), proto::printable(j.queue).c_str(), j.slots > 0 ? j.slots : j.ncpus,
                hms(j.walltime).c_str(), su_text(j).c_str(), exitc.c_str(),
                why.c_str());
  }
}

// The job once a pass has decided on it (no longer pending), polled; corrald runs a pass right
// after every submit. Throws when it is still pending after a minute.
proto::JobInfo first_decision(const std::string& socket, std::uint64_t id) {
  for (int i = 0; i < 6000; ++i) {
    proto::StatRep rep = expect<proto::StatRep>(request(socket, proto::StatReq{id}));
    if (!rep.jobs.empty() && rep.jobs[0].state != "pending") return rep.jobs[0];
    ::usleep(10000);
  }
  throw std::runtime_error("job " + std::to_string(id) + " (-now y) was neither started nor refused within a minute");
}

}  // namespace

std::string local_time(double t, const char* format) {
  if (t <= 0) return "-";
  time_t tt = static_cast<time_t>(t);
  tm lt{};
  localtime_r(&tt, &lt);
  char b[64];
  std::strftime(b, sizeof b, format, &lt);
  return b;
}

std::string clock_time(double t) { return local_time(t, "%H:%M:%S"); }

int cmd_submit(int argc, char** argv) {
  return guarded("submit", [&] {
    SubmitArgs a = parse_submit(argc, argv);
    if (a.help) return help(kSubmitHelp);
    char cwd[4096];
    if (!::getcwd(cwd, sizeof cwd)) throw std::runtime_error("cannot read the working directory");
    finish_submit(a.spec, cwd, environ);
    proto::SubmitRep rep = expect<proto::SubmitRep>(request(a.socket, proto::SubmitReq{a.spec}));
    if (a.spec.immediate) {
      // -now y, as qsub: the answer waits for the pass that starts the job or refuses it.
      const proto::JobInfo j = first_decision(a.socket, rep.id);
      if (j.state == "ended") {
        std::fprintf(stderr, "corral submit: job %llu refused: %s\n", static_cast<unsigned long long>(rep.id),
                     j.comment.c_str());
        return 1;
      }
    }
    std::printf("%llu\n", static_cast<unsigned long long>(rep.id));
    return 0;
  });
}

int cmd_stat(int argc, char** argv) {
  return guarded("stat", [&] {
    StatArgs c = parse_stat(argc, argv);
    if (c.help) return help(kStatHelp);
    const std::uint64_t id = c.filter.id;
    proto::StatRep rep = expect<proto::StatRep>(request(c.socket, c.filter));
    if (c.json) {
      if (id && !c.filter.tasks) {
        std::printf("%s\n", to_json(rep.jobs.at(0)).c_str());
      } else {
        std::printf("[");
        for (std::size_t i = 0; i < rep.jobs.size(); ++i)
          std::printf("%s%s", i ? ",\n" : "\n", to_json(rep.jobs[i]).c_str());
        std::printf("\n]\n");
      }
    } else {
      print_table(rep.jobs);
    }
    return 0;
  });
}

int cmd_cancel(int argc, char** argv) {
  return guarded("cancel", [&] {
    Common c = parse_common("cancel", argc, argv, false);
    if (c.help) return help(kCancelHelp);
    if (c.args.empty()) throw UsageError("missing job id");
    int rc = 0;
    for (const auto& a : c.args) {
      const JobRef ref = parse_job_ref(a);
      proto::Message m = request(c.socket, proto::CancelReq{ref.id, ref.index});
      if (auto* e = std::get_if<proto::ErrorRep>(&m)) {
        std::fprintf(stderr, "corral cancel: %s\n", e->message.c_str());
        rc = 1;
        continue;
      }
      proto::CancelRep rep = expect<proto::CancelRep>(m);
      std::printf("%s %s\n", job_ref_text(ref.id, ref.index).c_str(),
                  rep.state == "ended" ? "cancelled" : "cancelling");
    }
    return rc;
  });
}

int cmd_wait(int argc, char** argv) {
  return guarded("wait", [&] {
    Common c = parse_common("wait", argc, argv, false);
    if (c.help) return help(kWaitHelp);
    if (c.args.size() != 1) throw UsageError("give exactly one job id");
    const JobRef ref = parse_job_ref(c.args[0]);
    proto::WaitRep rep = expect<proto::WaitRep>(request(c.socket, proto::WaitReq{ref.id, ref.index}));
    const proto::JobInfo& j = rep.job;
    if (j.exit_code != 0)
      std::fprintf(stderr, "corral wait: job %s ended: %s, exit code %d%s%s\n",
                   job_ref_text(ref.id, ref.index).c_str(), j.end_reason.c_str(), j.exit_code,
                   j.comment.empty() ? "" : " - ", j.comment.c_str());
    if (j.exit_code < 0 || j.exit_code > 255) return 1;
    return j.exit_code;
  });
}

int cmd_node(int argc, char** argv) {
  return guarded("node", [&] {
    Common c = parse_common("node", argc, argv, true);
    if (c.help) return help(kNodeHelp);
    if (!c.args.empty()) throw UsageError("unexpected argument '" + c.args[0] + "'");
    proto::NodeRep rep = expect<proto::NodeRep>(request(c.socket, proto::NodeReq{}));
    const proto::NodeStatus& n = rep.node;
    if (c.json) {
      std::printf("%s\n", to_json(n).c_str());
      return 0;
    }
    std::printf("node      %s (%s, corrald pid %u, up %s)\n", n.node.c_str(), n.mode.c_str(),
                n.agent_pid, hms(static_cast<std::int64_t>(n.agent_uptime), true).c_str());
    std::printf("state     %s%s\n", n.state.c_str(),
                n.drain_reason.empty() ? "" : (": " + proto::printable(n.drain_reason)).c_str());
    std::printf("topology  %s\n", n.topology.c_str());
    std::printf("slots     %d of %d cores busy, %d jobs pending\n", n.slots_used, n.slots_total,
                n.pending);
    if (!n.criu_why.empty())
      std::printf("criu      %s (%s); checkpoints are cooperative\n",
                  n.criu_available ? "available" : "not available", n.criu_why.c_str());
    std::printf("\nrunning / suspended (%zu)\n", n.running.size());
    if (!n.running.empty())
      std::printf("  %-8s %-16s %-10s %-9s %-8s %-9s %9s %8s\n", "ID", "NAME", "USER", "STATE",
                  "CORES", "STARTED", "CPU_S", "RSS_MB");
    for (const auto& j : n.running)
      std::printf("  %-8llu %-16.16s %-10.10s %-9s %-8s %-9s %9.1f %8lld\n",
                  static_cast<unsigned long long>(j.id), j.name.c_str(), j.user.c_str(),
                  j.state.c_str(), cores_text(j.cores).c_str(), clock_time(j.start_time).c_str(),
                  j.cpu_seconds, static_cast<long long>(j.rss_mb));
    std::printf("\nrecent ends (%zu)\n", n.recent.size());
    if (!n.recent.empty())
      std::printf("  %-8s %-16s %-10s %-9s %5s  %s\n", "ID", "NAME", "USER", "ENDED", "EXIT",
                  "REASON");
    for (const auto& j : n.recent) {
      std::string exitc = j.exit_code >= 0 ? std::to_string(j.exit_code) : "-";
      std::printf("  %-8llu %-16.16s %-10.10s %-9s %5s  %s\n",
                  static_cast<unsigned long long>(j.id), j.name.c_str(), j.user.c_str(),
                  clock_time(j.end_time).c_str(), exitc.c_str(), why_text(j).c_str());
    }
    return 0;
  });
}

int cmd_report(int argc, char** argv) {
  return guarded("report", [&] {
    ReportArgs a = parse_report(argc, argv);
    if (a.help) return help(kReportHelp);
    proto::ReportRep rep = expect<proto::ReportRep>(request(a.socket, proto::ReportReq{a.week, a.project, a.json}));
    std::fputs(rep.text.c_str(), stdout);
    if (rep.text.empty() || rep.text.back() != '\n') std::fputc('\n', stdout);
    return 0;
  });
}

// suspend / resume (root) and requeue / checkpoint (owner or root) of running jobs.
int cmd_control(int argc, char** argv) {
  const char* cmd = argc > 0 ? argv[0] : "control";
  return guarded(cmd, [&] {
    ControlArgs c = parse_control(argc, argv);
    if (c.help) {
      std::printf(kControlHelp, cmd);
      return 0;
    }
    int rc = 0;
    for (const JobRef& ref : c.ids) {
      proto::Message m = request(c.socket, proto::ControlReq{ref.id, c.action, {}, ref.index});
      if (auto* e = std::get_if<proto::ErrorRep>(&m)) {
        std::fprintf(stderr, "corral %s: %s\n", cmd, e->message.c_str());
        rc = 1;
        continue;
      }
      proto::ControlRep rep = expect<proto::ControlRep>(m);
      std::printf("%s %s\n", job_ref_text(ref.id, ref.index).c_str(),
                  rep.message.empty() ? rep.state.c_str() : rep.message.c_str());
    }
    return rc;
  });
}

}  // namespace corral::cli
