// `corral sim TRACE [options]`: replays an SWF trace through the scheduling
// core in simulated time and prints one JSON object on stdout.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coordinator/names.hpp"
#include "coordinator/sim/sim.hpp"
#include "tools/cli_args.hpp"
#include "tools/cli_error.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/option_values.hpp"
#include "tools/corral/sim_oracle.hpp"
#include "tools/corral/sim_pictures.hpp"
#include "tools/corral/sim_policy.hpp"

namespace corral::cli {

namespace {

const char* kSimHelp =
    "usage: corral sim TRACE [options]\n"
    "       corral sim compare TRACE --policies A,B,... (see corral sim compare --help)\n"
    "\n"
    "Replays a Standard Workload Format trace (plain or .gz) through Corral's\n"
    "scheduling core in simulated time; prints one JSON object on stdout.\n"
    "\n"
    "options:\n"
    "  --policy P           corral (the default) | fcfs | easy | conservative | reserve |\n"
    "                       checkpoint; the last five are the textbook policies alone (FIFO\n"
    "                       order, requested times, no aging, no preemption): options\n"
    "                       given with them add to them\n"
    "  --order O            queue order: fifo | sjf | saf | wfp3 | lxf | sjbf | lxbf\n"
    "  --aging T            starvation bound: jobs waiting >= T go first, FIFO (0: no\n"
    "                       aging at all)\n"
    "  --aging-wide T       jobs of >= --wide-fraction of the machine age after T\n"
    "                       (if shorter than --aging; 0: same as --aging)\n"
    "  --aging-factor X     a job also ages once its wait reaches (X - 1) x its\n"
    "                       requested time, if sooner than --aging (default off)\n"
    "  --aging-backlog C    a job of >= --wide-fraction of the machine also ages once\n"
    "                       its wait reaches C x the backlog as it arrived (the\n"
    "                       running and queued jobs' predicted core-seconds over the\n"
    "                       cores), if sooner than --aging (default off)\n"
    "  --aged-ahead N       only the N oldest aged jobs go first; other aged jobs keep\n"
    "                       their place in --order (0: every aged job; default 6 with\n"
    "                       --policy corral, else 0)\n"
    "  --wide-fraction F    what a wide job is, as a fraction of the cores (default 0.1\n"
    "                       with --policy corral, else 0.5)\n"
    "  --max-reservation N  with --policy reserve: reservations per pass for -R y jobs\n"
    "                       (Grid Engine max_reservation; 0: none; default 1)\n"
    "  --reserve-min-procs N  with --policy reserve: jobs of N or more processors are\n"
    "                       submitted with -R y (SWF has no such field; default: no job,\n"
    "                       Grid Engine's -R n)\n"
    "  --reserve-all        the same for every job (--reserve-min-procs 1)\n"
    "  --default-duration T jobs whose trace line gives no requested time (SWF field 9)\n"
    "                       are planned with T, not with their run time (Grid Engine\n"
    "                       default_duration; not enforced: a job running longer is\n"
    "                       then expected to end at its run time)\n"
    "  --predict            run-time prediction from users' history; default with\n"
    "                       --policy corral only\n"
    "  --no-predict         use the requested times as estimates\n"
    "  --predictor NAME     with --predict: mean2 (EASY++: the mean of the user's last\n"
    "                       two runs), max3 (the longest of the user's last three\n"
    "                       runs), similar (the longest of the last three of the\n"
    "                       user's jobs with the same request and size, else max3);\n"
    "                       default similar with --policy corral, else mean2\n"
    "  --predict-order-only with --predict: predictions order the queue only; plans\n"
    "                       (reservations, backfills) use the requested times;\n"
    "                       default with --policy corral only\n"
    "  --no-predict-order-only  predictions plan too (EASY++)\n"
    "  --repredict          with --predict: queued jobs are predicted again when their\n"
    "                       user's job ends (--no-repredict: at submit only); default\n"
    "                       with --policy corral only\n"
    "  --burst-gap T        with --predict: a user's jobs submitted less than T apart\n"
    "                       are a burst; a job is predicted from its burst's ended\n"
    "                       jobs of the same request and size first, and a burst's\n"
    "                       first such job is predicted at 1 s until one ends (0: off,\n"
    "                       the default)\n"
    "  --scout-min N        with --burst-gap: a burst's first job of a kind is\n"
    "                       predicted at 1 s only once N jobs of the kind are in the\n"
    "                       burst (default 2: a second one)\n"
    "  --checkpoint-cost S  seconds a checkpoint holds the job's resources (default 60)\n"
    "  --restart-cost S     seconds a restart adds to the job (default 60)\n"
    "  --checkpoint-budget F  once F of the jobs arrived so far were checkpointed,\n"
    "                       only jobs checkpointed before may be again (0: no budget)\n"
    "  --split-factor P     checkpoint policy: long backfill candidates planned at P x estimate\n"
    "                       or their predicted run if shorter (default 0.05 with\n"
    "                       --policy corral, else 0.5); only checkpointable jobs\n"
    "  --split-threshold S  checkpoint policy: only estimates above S are split (default 1h)\n"
    "  --duration-offset T  Grid Engine's DURATION_OFFSET: added to every job's planned\n"
    "                       duration, pending and running (default 0: SWF run times are\n"
    "                       exact; corrald's default is the specification's 60 s)\n"
    "  --reserve-depth N    checkpoint policy: reservations per pass, the head's and\n"
    "                       the next N - 1 blocked jobs' in queue order (default 3\n"
    "                       with --policy corral, else 1)\n"
    "  --reserve-wait T     checkpoint policy: beyond the head's, reservations only for\n"
    "                       jobs that have waited T (0: any blocked job; default 2d\n"
    "                       with --policy corral, else 0)\n"
    "  --reserve-factor X   checkpoint policy: ... or for jobs that have waited\n"
    "                       (X - 1) x their requested time (default off)\n"
    "  --preempt            selective preemption by checkpoint (planner/preempt.hpp);\n"
    "                       default with --policy corral only\n"
    "  --no-preempt         no selective preemption\n"
    "  --preempt-factor F   a blocked job preempts jobs whose expansion factor x F is\n"
    "                       below its own (default 2)\n"
    "  --preempt-max N      blocked jobs that may preempt per pass, head first (default 4)\n"
    "  --preempt-min-wait T a job waits T before it may preempt (default 0)\n"
    "  --preempt-min-left T a victim has at least T of planned run left (default 10m)\n"
    "  --preempt-max-requeues N  a job requeued N times is no longer a victim (default 2)\n"
    "  --no-preempt-aged    aged jobs preempt only as other blocked jobs do\n"
    "  --nodes N            machine nodes (default: the trace's MaxProcs, else MaxNodes)\n"
    "  --cores C            cores per node (default 1)\n"
    "  --max-jobs N         replay only the first N usable jobs\n"
    "  --seed N             seed handed to every scheduling pass and to the draw of\n"
    "                       --checkpointable (default 1)\n"
    "  --checkpointable F   mark the fraction F of the jobs checkpointable, drawn at\n"
    "                       random from --seed (the same F and seed: the same jobs);\n"
    "                       only those are ever checkpointed, by any policy\n"
    "                       (default 1: every job; 0: none)\n"
    "  --starts FILE        write 'id,start' lines, one per job (first start)\n"
    "  --oracle-starts FILE analysis, not a policy: a job also ages when it has\n"
    "                       waited --oracle-fraction (default 1) x its wait in FILE,\n"
    "                       another run's --starts (e.g. EASY's), if it waited there\n"
    "                       at least --oracle-min-wait (default 0); needs aging\n"
    "  --gantt FILE.svg     draw a Gantt chart (who ran where) of --from .. --to\n"
    "  --from T, --to T     the chart's range, counted from the trace's first submit\n"
    "                       (e.g. --from 1d --to 36h; default: the first day)\n"
    "  --timeline FILE.svg  draw utilization and queue length (jobs and requested\n"
    "                       processor-hours) over the whole trace\n"
    "  --monitor FILE       append Grid Engine's MONITOR schedule file (never truncated,\n"
    "                       as Grid Engine and corrald): every pass's\n"
    "                       jobid:task:STATE:start:duration:level:name:resource:amount\n"
    "                       lines, each interval begun by '::::::::', one closing the\n"
    "                       replay (sge6-reservation-backfill.txt 2d); slower replay,\n"
    "                       the same schedule (a cores-only reservation's lines name\n"
    "                       the hosts it would get, without holding them)\n"
    "  --projects FILE      project plan (docs/plan-file.md): PBA allocations,\n"
    "                       service units charged; adds a `projects` object to the JSON\n"
    "  --report FILE        with --projects: the weekly per-project and per-user\n"
    "                       report (allocation, slots used, over/under-subscription,\n"
    "                       pending jobs, SUs charged, grant left) as tables\n"
    "  --report-json FILE   the same weekly reports as a JSON array\n"
    "  --nci                with --projects: also the NCI stage (shuffling, suspension,\n"
    "                       start window, grants)\n"
    "  --pending-threshold T  with --projects: wait before an allocated job may\n"
    "                       preempt (default 300s)\n"
    "  --start-window T     with --nci: a job's start window also closes T after\n"
    "                       its submit (then it heads the order); the JSON reports\n"
    "                       the jobs that waited past T + the longest request\n"
    "                       (default 0: the window is counted in cycles only)\n"
    "  --window-quantum T   with --start-window: a job that started through its window\n"
    "                       is not suspended by a later window job for T; a job never\n"
    "                       started whose window closed T ago suspends what it needs\n"
    "                       (default: the window): every job starts within window + T\n"
    "  --resume-window T    with --start-window: a job suspended T resumes, suspending\n"
    "                       the jobs on its cores (default 3 x the window; 0 off)\n"
    "  --pba-max-requeues N with --projects: a job PBA requeued N times is not\n"
    "                       preempted again (default 3; its suspensions do not count)\n"
    "  --preempt-mode M     with --projects: how PBA stops a job it preempts, each job's\n"
    "                       own choice: requeue (the default) or suspend; this sets it\n"
    "                       for every job (corrald: preempt_mode)\n"
    "  --suspend-users LIST with --projects: jobs of these trace users (SWF field 12,\n"
    "                       e.g. 3,17) choose suspend whatever --preempt-mode says\n"
    "                       (corrald: corral submit --preempt suspend)\n"
    "  --help               this text\n"
    "Times are seconds or take a suffix s, m, h, d or w (e.g. --aging 24h, --aging 2w).\n"
    "--policy corral (the default) is --policy checkpoint --order lxf --aging 2d\n"
    "--aging-wide 0 --aged-ahead 6 --wide-fraction 0.1 --predict --predictor similar\n"
    "--predict-order-only --repredict --no-preempt --split-factor 0.05\n"
    "--reserve-depth 3 --reserve-wait 2d, the best setting measured on every trace\n"
    "with 30 % and with no job checkpointable (bench/sim/RESULTS.md); the options\n"
    "above change any part of it.\n"
    "\n"
    "JSON figures (besides the settings): wait = first start - submit; max_wait,\n"
    "p99_wait (99th percentile, nearest rank) over the started jobs; mean_bsld =\n"
    "mean of max(1, (end - submit) / max(run, 10 s)) over finished jobs;\n"
    "utilization = useful core-seconds / (cores x makespan);\n"
    "idle_core_seconds_waiting = the integral over simulated time of the cores held\n"
    "by no job (running, or writing a checkpoint), counted only while at least one\n"
    "job is queued; jobs_checkpointable = jobs marked; jobs_checkpointed = jobs\n"
    "checkpointed at least once; checkpoints = checkpoints taken; checkpoint_seconds\n"
    "= their writing time summed (checkpoints x --checkpoint-cost), and\n"
    "checkpoint_cost_total / restart_cost_total the same in core-seconds.\n";

// What the command line asked for; unset options take the policy's value
// (names.hpp, policy_preset).
struct SimArgs {
  std::string trace, starts, monitor, projects, report, report_json;
  SimPictures pictures;
  SimOracle oracle;
  std::optional<double> oracle_fraction;
  std::optional<Time> oracle_min_wait;
  Policy policy = Policy::Corral;
  std::optional<Order> order;
  std::optional<Time> aging, aging_wide, default_duration, reserve_wait, burst_gap;
  std::optional<Time> pending_threshold, start_window, window_quantum, resume_window;
  std::optional<double> wide_fraction, split, aging_factor, reserve_factor, aging_backlog;
  std::optional<bool> predict, repredict, preempt, predict_order_only;
  std::optional<Predictor> predictor;
  std::optional<int> max_reservation, pba_max_requeues, reserve_depth, aged_ahead;
  std::optional<PreemptMode> preempt_mode;
  std::vector<long> suspend_users;  // trace user ids whose jobs choose suspend
  int reserve_min_procs = 0;  // 0: no job asks for a reservation (-R n)
  bool reserve_all = false, nci = false, help = false;
  sim::SimOptions opt;        // the options that go there unchanged
};

Time duration(const std::string& opt, const std::string& v) {
  try {
    return parse_duration(v);
  } catch (const std::invalid_argument& e) {
    refuse(opt + ": " + e.what());
  }
}

// A number in (lo, hi] (lo_open) or [lo, hi].
double number(const std::string& opt, const std::string& v, double lo, double hi, bool lo_open, const char* range) {
  char* end = nullptr;
  const double f = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !((lo_open ? f > lo : f >= lo) && f <= hi))
    refuse(opt + ": '" + v + "' is not a number in " + range);
  return f;
}

// A value parsed by names.hpp's `parse` (its words in the refusal).
template <class F> auto named_value(const std::string& opt, F parse, const std::string& v) {
  try {
    return parse(v);
  } catch (const std::invalid_argument& e) {
    refuse(opt + ": " + e.what());
  }
}

// "3,17": trace user ids.
std::vector<long> user_list(const std::string& opt, const std::string& v) {
  std::vector<long> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(static_cast<long>(whole(opt, item, 0, 1LL << 40)));
  if (out.empty()) refuse(opt + ": expected user ids, e.g. 3,17");
  return out;
}

template <class E> E named(const std::string& opt, const std::string& v) {
  try {
    return parse_name<E>(v);
  } catch (const std::invalid_argument& e) {
    refuse(opt + ": " + e.what());
  }
}

// The option table: each value is parsed (and refused) as it is read.
void add_options(CLI::App& app, SimArgs& a) {
  sim::SimOptions& o = a.opt;
  auto value = [&app](const char* name, const char* type, std::function<void(const std::string&)> f) {
    app.add_option_function<std::string>(name, std::move(f))->type_name(type);
  };
  auto flag = [&app](const char* name, std::function<void()> f) {
    app.add_flag_callback(name, std::move(f))->disable_flag_override();
  };
  app.set_help_flag();  // kSimHelp is the help text
  app.add_flag("-h,--help", a.help)->disable_flag_override();
  app.add_option("TRACE", a.trace);
  value("--policy", "P", [&a](const std::string& v) { a.policy = named<Policy>("--policy", v); });
  value("--order", "O", [&a](const std::string& v) { a.order = named<Order>("--order", v); });
  value("--aging", "T", [&a](const std::string& v) { a.aging = duration("--aging", v); });
  value("--aging-wide", "T", [&a](const std::string& v) { a.aging_wide = duration("--aging-wide", v); });
  value("--aging-factor", "X", [&a](const std::string& v) { a.aging_factor = number("--aging-factor", v, 1, 1e6, true, "(1, 1e6]"); });
  value("--aged-ahead", "N", [&a](const std::string& v) { a.aged_ahead = static_cast<int>(whole("--aged-ahead", v, 0, 1 << 20)); });
  value("--wide-fraction", "F", [&a](const std::string& v) { a.wide_fraction = number("--wide-fraction", v, 0, 1, true, "(0, 1]"); });
  value("--split-factor", "P", [&a](const std::string& v) { a.split = named_value("--split-factor", parse_split_factor, v); });
  value("--split-threshold", "S", [&o](const std::string& v) { o.sched.planner.checkpoint_threshold = duration("--split-threshold", v); });
  value("--duration-offset", "T", [&o](const std::string& v) { o.duration_offset = duration("--duration-offset", v); });
  value("--reserve-depth", "N", [&a](const std::string& v) { a.reserve_depth = static_cast<int>(whole("--reserve-depth", v, 1, 1 << 20)); });
  value("--reserve-wait", "T", [&a](const std::string& v) { a.reserve_wait = duration("--reserve-wait", v); });
  value("--reserve-factor", "X", [&a](const std::string& v) { a.reserve_factor = number("--reserve-factor", v, 1, 1e6, true, "(1, 1e6]"); });
  value("--aging-backlog", "C", [&a](const std::string& v) { a.aging_backlog = number("--aging-backlog", v, 0, 1e6, false, "[0, 1e6]"); });
  value("--burst-gap", "T", [&a](const std::string& v) { a.burst_gap = duration("--burst-gap", v); });
  value("--scout-min", "N", [&o](const std::string& v) { o.scout_min = static_cast<std::uint32_t>(whole("--scout-min", v, 2, 1 << 20)); });
  flag("--predict", [&a] { a.predict = true; });
  flag("--no-predict", [&a] { a.predict = false; });
  value("--predictor", "NAME", [&a](const std::string& v) { a.predictor = named<Predictor>("--predictor", v); });
  flag("--predict-order-only", [&a] { a.predict_order_only = true; });
  flag("--no-predict-order-only", [&a] { a.predict_order_only = false; });
  flag("--repredict", [&a] { a.repredict = true; });
  flag("--no-repredict", [&a] { a.repredict = false; });
  value("--checkpoint-cost", "S", [&o](const std::string& v) { o.checkpoint_cost = duration("--checkpoint-cost", v); });
  value("--restart-cost", "S", [&o](const std::string& v) { o.restart_cost = duration("--restart-cost", v); });
  value("--checkpoint-budget", "F", [&o](const std::string& v) { o.checkpoint_budget = number("--checkpoint-budget", v, 0, 1, false, "[0, 1]"); });
  flag("--preempt", [&a] { a.preempt = true; });
  flag("--no-preempt", [&a] { a.preempt = false; });
  value("--preempt-factor", "F", [&o](const std::string& v) { o.sched.preempt.factor = number("--preempt-factor", v, 1, 1e6, false, "[1, 1e6]"); });
  value("--preempt-max", "N", [&o](const std::string& v) { o.sched.preempt.max_preemptors = static_cast<int>(whole("--preempt-max", v, 0, 1 << 20)); });
  value("--preempt-min-wait", "T", [&o](const std::string& v) { o.sched.preempt.min_wait = duration("--preempt-min-wait", v); });
  value("--preempt-min-left", "T", [&o](const std::string& v) { o.sched.preempt.min_left = duration("--preempt-min-left", v); });
  value("--preempt-max-requeues", "N", [&o](const std::string& v) { o.sched.preempt.max_requeues = static_cast<int>(whole("--preempt-max-requeues", v, 0, 1 << 20)); });
  flag("--no-preempt-aged", [&o] { o.sched.preempt.aged_preempt = false; });
  value("--nodes", "N", [&o](const std::string& v) { o.nodes = static_cast<int>(whole("--nodes", v, 1, 1 << 20)); });
  value("--cores", "C", [&o](const std::string& v) { o.cores = static_cast<int>(whole("--cores", v, 1, 4096)); });
  value("--max-jobs", "N", [&o](const std::string& v) { o.max_jobs = static_cast<std::size_t>(whole("--max-jobs", v, 1, 1LL << 40)); });
  value("--seed", "N", [&o](const std::string& v) { o.seed = static_cast<std::uint64_t>(whole("--seed", v, 0, 1LL << 62)); });
  value("--checkpointable", "F", [&o](const std::string& v) { o.checkpointable = number("--checkpointable", v, 0, 1, false, "[0, 1]"); });
  value("--starts", "FILE", [&a](const std::string& v) { a.starts = v; });
  value("--oracle-starts", "FILE", [&a](const std::string& v) {
    if (v.empty()) refuse("--oracle-starts: empty file name");
    a.oracle.file = v;
  });
  value("--oracle-fraction", "X", [&a](const std::string& v) { a.oracle_fraction = number("--oracle-fraction", v, 0, 1e3, false, "[0, 1000]"); });
  value("--oracle-min-wait", "T", [&a](const std::string& v) { a.oracle_min_wait = duration("--oracle-min-wait", v); });
  value("--gantt", "FILE.svg", [&a](const std::string& v) { a.pictures.gantt = v; });
  value("--timeline", "FILE.svg", [&a](const std::string& v) { a.pictures.timeline = v; });
  value("--from", "T", [&a](const std::string& v) { a.pictures.from = duration("--from", v); });
  value("--to", "T", [&a](const std::string& v) { a.pictures.to = duration("--to", v); });
  value("--monitor", "FILE", [&a](const std::string& v) {
    if (v.empty()) refuse("--monitor: empty file name");
    a.monitor = v;
  });
  value("--max-reservation", "N", [&a](const std::string& v) { a.max_reservation = static_cast<int>(whole("--max-reservation", v, 0, 1 << 20)); });
  value("--reserve-min-procs", "N", [&a](const std::string& v) { a.reserve_min_procs = static_cast<int>(whole("--reserve-min-procs", v, 1, 1 << 24)); });
  flag("--reserve-all", [&a] { a.reserve_all = true; });
  value("--default-duration", "T", [&a](const std::string& v) {
    a.default_duration = duration("--default-duration", v);
    if (*a.default_duration < 1) refuse("--default-duration: must be at least 1 s");
  });
  value("--projects", "FILE", [&a](const std::string& v) { a.projects = v; });
  value("--report", "FILE", [&a](const std::string& v) { a.report = v; });
  value("--report-json", "FILE", [&a](const std::string& v) { a.report_json = v; });
  flag("--nci", [&a] { a.nci = true; });
  value("--pending-threshold", "T", [&a](const std::string& v) { a.pending_threshold = duration("--pending-threshold", v); });
  value("--start-window", "T", [&a](const std::string& v) { a.start_window = duration("--start-window", v); });
  value("--window-quantum", "T", [&a](const std::string& v) { a.window_quantum = duration("--window-quantum", v); });
  value("--resume-window", "T", [&a](const std::string& v) { a.resume_window = duration("--resume-window", v); });
  value("--preempt-mode", "M", [&a](const std::string& v) { a.preempt_mode = named_value("--preempt-mode", parse_preempt_mode, v); });
  value("--suspend-users", "LIST", [&a](const std::string& v) { a.suspend_users = user_list("--suspend-users", v); });
  value("--pba-max-requeues", "N", [&a](const std::string& v) { a.pba_max_requeues = static_cast<int>(whole("--pba-max-requeues", v, 0, 1 << 20)); });
}

// Options that need others (refused with what they need).
void check_combinations(SimArgs& a) {
  if (a.trace.empty()) refuse("missing TRACE (see corral sim --help)");
  if ((a.oracle_fraction || a.oracle_min_wait) && a.oracle.file.empty())
    refuse(std::string(a.oracle_fraction ? "--oracle-fraction" : "--oracle-min-wait") + " needs --oracle-starts FILE");
  if (std::string e = picture_usage_error(a.pictures); !e.empty()) refuse(e);
  if ((!a.report.empty() || !a.report_json.empty()) && a.projects.empty()) refuse("--report/--report-json need --projects FILE");
  if ((a.nci || a.pending_threshold) && a.projects.empty())
    refuse(std::string(a.nci ? "--nci" : "--pending-threshold") + " needs --projects FILE");
  if (a.start_window && !a.nci) refuse("--start-window needs --nci");
  if (a.window_quantum && !a.start_window) refuse("--window-quantum needs --start-window");
  if (a.resume_window && !a.start_window) refuse("--resume-window needs --start-window");
  if (a.pba_max_requeues && a.projects.empty()) refuse("--pba-max-requeues needs --projects FILE");
  if (a.preempt_mode && a.projects.empty()) refuse("--preempt-mode needs --projects FILE");
  if (!a.suspend_users.empty() && a.projects.empty()) refuse("--suspend-users needs --projects FILE");
  if (a.reserve_all && a.reserve_min_procs > 0) refuse("give either --reserve-all or --reserve-min-procs N, not both");
  if (a.reserve_all) a.reserve_min_procs = 1;
  // Only the reserve policy reads max_reservation and a job's -R y.
  if (a.policy != Policy::Reserve && (a.max_reservation || a.reserve_min_procs > 0))
    refuse(std::string(a.max_reservation ? "--max-reservation" : a.reserve_all ? "--reserve-all" : "--reserve-min-procs") +
           " needs --policy reserve (other policies ignore -R y)");
}

// The policy's settings, then every option given on top.
void apply_args(SimArgs& a) {
  sim::SimOptions& opt = a.opt;
  apply_policy(a.policy, opt.sched);
  const PolicyPreset preset = policy_preset(a.policy);
  opt.predict = a.predict.value_or(preset.predict);
  opt.repredict = a.repredict.value_or(preset.repredict);
  opt.predictor = a.predictor.value_or(preset.predictor);
  opt.predict_order_only = a.predict_order_only.value_or(preset.predict_order_only);
  opt.burst_gap = a.burst_gap.value_or(0);
  opt.aging_backlog = a.aging_backlog.value_or(0);
  a.oracle.fraction = a.oracle_fraction.value_or(1);
  a.oracle.min_wait = a.oracle_min_wait.value_or(0);
  if (a.reserve_depth) opt.sched.planner.reserve_depth = *a.reserve_depth;
  if (a.reserve_wait) opt.sched.planner.reserve_wait = *a.reserve_wait;
  if (a.order) opt.sched.order.policy = *a.order;
  if (a.aging) opt.sched.order.aging = *a.aging;
  if (a.aging_wide) opt.sched.order.aging_wide = *a.aging_wide;
  if (a.aged_ahead) opt.sched.order.aged_ahead = *a.aged_ahead;
  if (a.aging_factor) opt.sched.order.aging_factor = *a.aging_factor;
  if (a.reserve_factor) opt.sched.planner.reserve_factor = *a.reserve_factor;
  if (a.wide_fraction) opt.sched.order.wide_fraction = *a.wide_fraction;
  if (a.split) opt.sched.planner.checkpoint_split = *a.split;
  if (a.preempt) opt.sched.preempt.enabled = *a.preempt;
  opt.record_segments = a.pictures.wanted();
  if (a.max_reservation) opt.sched.planner.max_reservation = *a.max_reservation;
  if (a.default_duration) opt.sched.planner.default_duration = *a.default_duration;
  if (a.reserve_min_procs > 0 || a.default_duration || a.preempt_mode || !a.suspend_users.empty()) {
    opt.on_arrival = [min_procs = a.reserve_min_procs, dd = a.default_duration.value_or(0),
                      mode = a.preempt_mode.value_or(PreemptMode::Requeue),
                      suspend = a.suspend_users](Job& j, const sim::SwfJob& s) {
      if (min_procs > 0) j.reserve = s.procs >= min_procs;
      // PBA's suspend-or-requeue, the job's own choice (pba-synopsys-patent.txt).
      j.preempt = std::find(suspend.begin(), suspend.end(), s.user) != suspend.end() ? PreemptMode::Suspend : mode;
      // No requested time in the trace: the job has no walltime (a Grid
      // Engine job without h_rt), so the planner assumes default_duration.
      // Its estimate says the same (unless predicted): the simulator expects
      // a running job to end at its start + estimate.
      if (dd > 0 && !s.requested) {
        j.walltime = 0;
        if (j.estimate <= 0) j.estimate = dd;
      }
    };
  }
}

void progress_bar(double frac) {
  int w = 40, k = static_cast<int>(std::lround(frac * w));
  std::fprintf(stderr, "\r[%-*.*s] %3d%%", w, k, "########################################",
               static_cast<int>(std::lround(frac * 100)));
  if (frac >= 1.0) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

// Reads the project plan into opt (PBA, and NCI with --nci). Refusals as UsageError text.
std::optional<std::string> use_plan(SimArgs& a, const sim::SwfTrace& trace) {
  std::ifstream f(a.projects, std::ios::binary);
  if (!f) return "--projects: cannot read '" + a.projects + "': " + std::strerror(errno);
  std::ostringstream text;
  text << f.rdbuf();
  // Relative weeks (+N) and deadlines count from the trace's first submit.
  pba::PlanParseOptions po;
  po.origin = trace.jobs.front().submit;
  pba::PlanParseResult pr = pba::parse_plan(text.str(), po);
  if (!pr.ok()) {
    std::string all;
    for (const std::string& e : pr.errors) all += (all.empty() ? "" : "\ncorral sim: ") + a.projects + ": " + e;
    return all;
  }
  if (pr.plan.projects.empty()) return a.projects + ": no project declared";
  sim::SimOptions& opt = a.opt;
  sim::use_projects(opt, pr.plan, a.nci);
  opt.weekly_reports = !a.report.empty() || !a.report_json.empty();
  if (a.pending_threshold) opt.sched.pba.preempt_after = *a.pending_threshold;
  if (a.start_window) opt.sched.nci.window_wait = *a.start_window;
  // With a time window NCI lets PBA's allocated class use the cores
  // suspended jobs hold (nci.cpp), so PBA counts them free.
  if (a.start_window.value_or(0) > 0) opt.sched.pba.suspended_hold_cores = false;
  if (a.window_quantum) opt.sched.nci.window_quantum = *a.window_quantum;
  if (a.resume_window) opt.sched.nci.resume_window = *a.resume_window;
  if (a.pba_max_requeues) opt.sched.pba.max_requeues = *a.pba_max_requeues;
  return std::nullopt;
}

// The JSON's settings, before the results.
nlohmann::ordered_json labels_of(const SimArgs& a, const sim::SwfTrace& trace) {
  const sim::SimOptions& opt = a.opt;
  nlohmann::ordered_json l = {
      {"trace", a.trace},
      {"policy", name(a.policy)},
      {"order", name(opt.sched.order.policy)},
      {"aging", opt.sched.order.aging},
      {"aging_wide", opt.sched.order.aging_wide},
      {"aged_ahead", opt.sched.order.aged_ahead},
      {"aging_factor", opt.sched.order.aging_factor},
      {"aging_backlog", opt.sched.order.aging > 0 ? opt.aging_backlog : 0},
      {"wide_fraction", opt.sched.order.wide_fraction},
      {"split_factor", opt.sched.planner.checkpoint_split},
      {"reserve_depth", opt.sched.planner.reserve_depth},
      {"reserve_wait", opt.sched.planner.reserve_wait},
      {"reserve_factor", opt.sched.planner.reserve_factor},
      {"predict", opt.predict},
      {"predictor", name(opt.predictor)},
      {"predict_order_only", opt.predict_order_only && opt.predict},
      {"preempt", opt.sched.preempt.enabled},
      {"repredict", opt.repredict && opt.predict},
      {"burst_gap", opt.predict ? opt.burst_gap : 0},
      {"scout_min", opt.scout_min},
      {"checkpointable", opt.checkpointable},
      {"seed", opt.seed},
      {"checkpoint_budget", opt.checkpoint_budget},
      {"checkpoint_cost", opt.checkpoint_cost},
      {"restart_cost", opt.restart_cost},
      {"bad_lines", trace.bad_lines},
      {"skipped", trace.skipped},
  };
  if (a.policy == Policy::Reserve) {
    l["max_reservation"] = opt.sched.planner.max_reservation;
    l["reserve_min_procs"] = a.reserve_min_procs;
  }
  if (a.default_duration) l["default_duration"] = *a.default_duration;
  if (opt.duration_offset) l["duration_offset"] = opt.duration_offset;
  if (!a.oracle.file.empty()) {
    l["oracle_starts"] = a.oracle.file;
    l["oracle_fraction"] = a.oracle.fraction;
    l["oracle_min_wait"] = a.oracle.min_wait;
  }
  if (!a.projects.empty()) {
    l["projects_file"] = a.projects;
    l["nci"] = a.nci;
  }
  return l;
}

// The replay, its JSON on stdout and the files asked for. Exit code.
int run(SimArgs& a, const sim::SwfTrace& trace, std::FILE*& monitor) {
  sim::SimResult r = sim::simulate(trace, a.opt);
  if (std::FILE* f = std::exchange(monitor, nullptr)) {
    // The specification's file ends with the separator too: each pass's
    // block is followed by one (a reader may split on it either way).
    std::fputs("::::::::\n", f);
    const bool bad = std::ferror(f) != 0;
    if (std::fclose(f) != 0 || bad) throw std::runtime_error("--monitor: cannot write '" + a.monitor + "'");
  }
  std::printf("%s\n", sim::to_json(r, labels_of(a, trace)).c_str());
  if (!a.starts.empty()) write_text_file(a.starts, sim::starts_csv(r));
  if (!a.report.empty()) {
    std::string text;
    for (const NciReport& w : r.weekly) text += render_report_table(w) + "\n";
    write_text_file(a.report, text);
  }
  if (!a.report_json.empty()) {
    std::string text = "[";
    for (std::size_t i = 0; i < r.weekly.size(); ++i) text += (i ? ",\n" : "\n") + render_report_json(r.weekly[i]);
    write_text_file(a.report_json, text + "\n]\n");
  }
  if (a.pictures.wanted())
    write_pictures(a.pictures, r, trace, base_name(a.trace), std::string(name(a.policy)), a.opt.cores);
  if (r.unstarted > 0)
    std::fprintf(stderr, "corral sim: %zu job(s) never started (the planner left them pending)\n", r.unstarted);
  return 0;
}

}  // namespace

std::string sim_default_policy() { return std::string(name(Policy::Corral)); }

void sim_policy_options(const std::string& policy, sim::SimOptions& opt) {
  SimArgs a;
  try {
    a.policy = parse_name<Policy>(policy);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--policies: ") + e.what());
  }
  apply_args(a);
  opt = a.opt;
}

int cmd_sim(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "compare") return cmd_compare(argc - 1, argv + 1);
  SimArgs a;
  try {
    CLI::App app("corral sim");
    add_options(app, a);
    cli_parse(app, cli_args(argc, argv));
    if (a.help) {
      std::fputs(kSimHelp, stdout);
      return 0;
    }
    check_combinations(a);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "corral sim: %s\n", usage_error(e).c_str());
    return 2;
  }
  apply_args(a);
  if (isatty(STDERR_FILENO)) a.opt.progress = progress_bar;

  sim::SwfTrace trace;
  try {
    // With --nodes the machine is the one given: larger jobs are skipped.
    trace = sim::read_swf(a.trace, a.opt.nodes > 0 ? a.opt.nodes * a.opt.cores : 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral sim: %s\n", e.what());
    return 2;
  }
  if (trace.bad_lines > 0)
    std::fprintf(stderr, "corral sim: %zu bad line(s) skipped in '%s' (first: %s)\n", trace.bad_lines,
                 a.trace.c_str(), trace.first_bad.c_str());
  if (trace.jobs.empty()) {
    std::fprintf(stderr, "corral sim: '%s' has no usable job\n", a.trace.c_str());
    return 2;
  }
  if (!a.oracle.file.empty()) {
    // Job::age_at counts only where jobs age at all.
    if (a.opt.sched.order.aging <= 0) {
      std::fprintf(stderr, "corral sim: --oracle-starts needs aging (--aging T, T > 0)\n");
      return 2;
    }
    try {
      use_oracle(a.opt, a.oracle, read_oracle_starts(a.oracle.file));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "corral sim: %s\n", e.what());
      return 2;
    }
  }
  if (!a.projects.empty())
    if (auto why = use_plan(a, trace)) {
      std::fprintf(stderr, "corral sim: %s\n", why->c_str());
      return 2;
    }

  // The schedule file is opened before the replay: a bad path fails at once.
  std::FILE* monitor = nullptr;
  if (!a.monitor.empty()) {
    // Appended, never truncated: Grid Engine's schedule file and corrald's monitor_file.
    monitor = std::fopen(a.monitor.c_str(), "a");
    if (!monitor) {
      std::fprintf(stderr, "corral sim: --monitor: cannot write '%s': %s\n", a.monitor.c_str(), std::strerror(errno));
      return 2;
    }
    a.opt.on_monitor = [monitor](const std::vector<std::string>& lines) {
      for (const std::string& l : lines) {
        std::fwrite(l.data(), 1, l.size(), monitor);
        std::fputc('\n', monitor);
      }
    };
  }
  try {
    return run(a, trace, monitor);
  } catch (const std::exception& e) {
    if (monitor) std::fclose(monitor);
    std::fprintf(stderr, "corral sim: %s\n", e.what());
    return dynamic_cast<const std::invalid_argument*>(&e) ? 2 : 1;
  }
}

}  // namespace corral::cli
