// `corral sim TRACE [options]`: replays an SWF trace through the scheduling
// core in simulated time and prints one JSON object on stdout.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/sim/sim.hpp"
#include "tools/corral/commands.hpp"

namespace corral::cli {

namespace {

// The default is the best setting measured on all seven traces with 30 % and
// with no job checkpointable (bench/sim/RESULTS.md): checkpoint-based
// aggressive backfilling (backfill candidates longer than 1 h planned at
// p = 0.25 x their request, or their predicted run if shorter, checkpointed
// at the window's end; only checkpointable jobs), reservations for the head
// and the next two blocked jobs, queue ordered by largest expansion factor on
// predicted run times (the longest of the last three runs of the user's
// similar jobs, re-predicted as they end) that order only: plans use the
// requested times, so a job outliving its prediction delays no reservation;
// jobs waiting 2 days go first in FIFO order. No selective preemption: with
// few checkpointable jobs it checkpointed more jobs for no gain.
constexpr const char* kDefaultPolicy = "checkpoint";
constexpr const char* kDefaultOrder = "lxf";
constexpr Time kDefaultAging = 2 * 86400;
constexpr Time kDefaultAgingWide = 0;
constexpr double kDefaultWideFraction = 0.1;
constexpr double kDefaultSplit = 0.25;
constexpr int kDefaultReserveDepth = 3;
constexpr bool kDefaultPredict = true;
constexpr sim::PredictKind kDefaultPredictor = sim::PredictKind::Similar;
constexpr bool kDefaultPredictOrderOnly = true;
constexpr bool kDefaultRepredict = true;
// Selective preemption is never on by default, so
// `--policy easy --order fifo --aging 0 --no-predict` stays textbook EASY.
constexpr bool kDefaultPreemptWithCheckpoint = false;

const char* kHelp =
    "usage: corral sim TRACE [options]\n"
    "\n"
    "Replays a Standard Workload Format trace (plain or .gz) through Corral's\n"
    "scheduling core in simulated time; prints one JSON object on stdout.\n"
    "\n"
    "options:\n"
    "  --policy P           fcfs | easy | conservative | reserve | checkpoint\n"
    "  --order O            queue order: fifo | sjf | saf | wfp3 | lxf | sjbf | lxbf\n"
    "  --aging T            starvation bound: jobs waiting >= T go first, FIFO (0: no\n"
    "                       aging at all)\n"
    "  --aging-wide T       jobs of >= --wide-fraction of the machine age after T\n"
    "                       (if shorter than --aging; 0: same as --aging)\n"
    "  --wide-fraction F    what a wide job is, as a fraction of the cores (default 0.1)\n"
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
    "  --predict            run-time prediction from users' history (default)\n"
    "  --no-predict         use the requested times as estimates\n"
    "  --predict-order-only with --predict: predictions order the queue only; plans\n"
    "                       (reservations, backfills) use the requested times (default)\n"
    "  --no-predict-order-only  predictions plan too (EASY++)\n"
    "  --predictor NAME     with --predict: mean2 (EASY++), max3 (the\n"
    "                       longest of the user's last three runs), similar (the\n"
    "                       longest of the last three of the user's jobs with the\n"
    "                       same request and size, else max3; the default);\n"
    "                       coordinator/sim/predict.hpp\n"
    "  --repredict          with --predict: queued jobs are predicted again when their\n"
    "                       user's job ends (--no-repredict: at submit only)\n"
    "  --checkpoint-cost S  seconds a checkpoint holds the job's resources (default 60)\n"
    "  --restart-cost S     seconds a restart adds to the job (default 60)\n"
    "  --checkpoint-budget F  once F of the jobs arrived so far were checkpointed,\n"
    "                       only jobs checkpointed before may be again (0: no budget)\n"
    "  --split-factor P     checkpoint policy: long backfill candidates planned at P x estimate\n"
    "                       or their predicted run if shorter (default 0.25)\n"
    "  --split-threshold S  checkpoint policy: only estimates above S are split (default 1h)\n"
    "  --reserve-depth N    checkpoint policy: reservations per pass, the head's and\n"
    "                       the next N - 1 blocked jobs' in queue order (default 3)\n"
    "  --preempt            selective preemption by checkpoint (planner/preempt.hpp);\n"
    "                       off by default\n"
    "  --no-preempt         no selective preemption\n"
    "  --preempt-factor F   a blocked job preempts jobs whose expansion factor x F is\n"
    "                       below its own (default 2)\n"
    "  --preempt-max N      blocked jobs that may preempt per pass, head first (default 4)\n"
    "  --preempt-min-wait T a job waits T before it may preempt (default 0)\n"
    "  --preempt-min-left T a victim has at least T of planned run left (default 10m)\n"
    "  --preempt-max-requeues N  a job requeued N times is no longer a victim (default 2)\n"
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
    "  --gantt FILE.svg     draw a Gantt chart of --from T .. --to T (seconds)\n"
    "  --from T, --to T     time range of the chart (default: the first day)\n"
    "  --monitor FILE       write Grid Engine's MONITOR schedule file: every pass's\n"
    "                       jobid:task:STATE:start:duration:level:name:resource:amount\n"
    "                       lines, each interval begun by '::::::::', one closing the\n"
    "                       file (sge6-reservation-backfill.txt 2d); slower replay,\n"
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
    "  --pba-max-requeues N with --projects: a job PBA preempted N times is not\n"
    "                       preempted again (default 3)\n"
    "  --help               this text\n"
    "Times accept a suffix s, m, h or d (e.g. --aging 24h).\n"
    "\n"
    "JSON figures (besides the options given): wait = first start - submit;\n"
    "max_wait, p99_wait (99th percentile, nearest rank) over the started jobs;\n"
    "mean_bsld = mean of max(1, (end - submit) / max(run, 10 s)) over finished jobs;\n"
    "utilization = useful core-seconds / (cores x makespan);\n"
    "idle_core_seconds_waiting = the integral over simulated time of the cores held\n"
    "by no job (running, or writing a checkpoint), counted only while at least one\n"
    "job is queued; jobs_checkpointable = jobs marked; jobs_checkpointed = jobs\n"
    "checkpointed at least once; checkpoints = checkpoints taken; checkpoint_seconds\n"
    "= their writing time summed (checkpoints x --checkpoint-cost), and\n"
    "checkpoint_cost_total / restart_cost_total the same in core-seconds.\n"
    "Default: --policy checkpoint --order lxf --aging 2d --aging-wide 0 --predict\n"
    "--predictor similar --predict-order-only --repredict --no-preempt\n"
    "--split-factor 0.25 --reserve-depth 3, the best setting measured on every\n"
    "trace with 30 % and with no job checkpointable (bench/sim/RESULTS.md).\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

long long parse_int(std::string_view opt, const std::string& v, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || x < lo || x > hi)
    throw UsageError(std::string(opt) + ": '" + v + "' is not a whole number in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return x;
}

Time parse_time(std::string_view opt, std::string v) {
  long long mul = 1;
  if (!v.empty()) {
    switch (v.back()) {
      case 's': mul = 1; v.pop_back(); break;
      case 'm': mul = 60; v.pop_back(); break;
      case 'h': mul = 3600; v.pop_back(); break;
      case 'd': mul = 86400; v.pop_back(); break;
      default: break;
    }
  }
  return parse_int(opt, v, 0, (1LL << 40) / mul) * mul;
}

Backfill parse_policy(const std::string& p) {
  if (p == "fcfs") return Backfill::Fcfs;
  if (p == "easy") return Backfill::Easy;
  if (p == "conservative") return Backfill::Conservative;
  if (p == "reserve") return Backfill::Reserve;
  if (p == "checkpoint") return Backfill::Checkpoint;
  throw UsageError("--policy: unknown policy '" + p + "' (fcfs, easy, conservative, reserve, checkpoint)");
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  f << text;
  f.close();
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
}

std::string json_num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

void progress_bar(double frac) {
  int w = 40, k = static_cast<int>(std::lround(frac * w));
  std::fprintf(stderr, "\r[%-*.*s] %3d%%", w, k, "########################################",
               static_cast<int>(std::lround(frac * 100)));
  if (frac >= 1.0) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

}  // namespace

int cmd_sim(int argc, char** argv) {
  std::string trace_path, policy = kDefaultPolicy, order = kDefaultOrder, starts_path, gantt_path;
  std::string report_path, report_json_path;
  sim::SimOptions opt;
  opt.sched.order.aging = kDefaultAging;
  opt.sched.order.aging_wide = kDefaultAgingWide;
  opt.sched.order.wide_fraction = kDefaultWideFraction;
  opt.sched.planner.checkpoint_split = kDefaultSplit;
  opt.sched.planner.reserve_depth = kDefaultReserveDepth;
  opt.predict = kDefaultPredict;
  opt.predictor = kDefaultPredictor;
  opt.predict_order_only = kDefaultPredictOrderOnly;
  opt.repredict = kDefaultRepredict;
  int preempt = -1;  // -1: the default for the policy
  Time from = -1, to = -1;
  std::string projects_path;
  bool nci = false;
  Time pending_threshold = -1;
  Time start_window = -1;    // -1: use_projects' default
  Time window_quantum = -1;  // -1: NciConfig's default
  Time resume_window = -1;   // -1: NciConfig's default
  int pba_max_requeues = -1;
  std::string monitor_path;
  int max_reservation = -1;    // -1: PlannerConfig's default
  int reserve_min_procs = 0;   // 0: no job asks for a reservation (-R n)
  bool reserve_all = false;
  Time default_duration = -1;  // -1: the SWF convention (no job lacks a requested time)
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i], val;
      bool has_eq = false;
      if (a.rfind("--", 0) == 0) {
        if (auto eq = a.find('='); eq != std::string::npos) {
          val = a.substr(eq + 1);
          a = a.substr(0, eq);
          has_eq = true;
        }
      }
      auto value = [&]() -> std::string {
        if (has_eq) return val;
        if (i + 1 >= argc) throw UsageError(a + ": missing value");
        return argv[++i];
      };
      if (a == "--help" || a == "-h") {
        std::fputs(kHelp, stdout);
        return 0;
      } else if (a == "--policy") {
        policy = value();
        parse_policy(policy);
      } else if (a == "--order") {
        order = value();
        if (!order_policy_known(order))
          throw UsageError("--order: unknown order '" + order + "' (fifo, sjf, saf, wfp3, lxf, sjbf, lxbf)");
      } else if (a == "--aging") {
        opt.sched.order.aging = parse_time(a, value());
      } else if (a == "--aging-wide") {
        opt.sched.order.aging_wide = parse_time(a, value());
      } else if (a == "--wide-fraction") {
        std::string v = value();
        char* end = nullptr;
        double f = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(f > 0 && f <= 1))
          throw UsageError("--wide-fraction: '" + v + "' is not a number in (0, 1]");
        opt.sched.order.wide_fraction = f;
      } else if (a == "--predict") {
        if (has_eq) throw UsageError("--predict takes no value");
        opt.predict = true;
      } else if (a == "--repredict") {
        opt.repredict = true;
      } else if (a == "--no-repredict") {
        opt.repredict = false;
      } else if (a == "--predictor") {
        std::string v = value();
        if (!sim::parse_predict_kind(v, opt.predictor))
          throw UsageError("--predictor: unknown predictor '" + v + "' (mean2, max3, similar)");
      } else if (a == "--predict-order-only") {
        opt.predict_order_only = true;
      } else if (a == "--no-predict-order-only") {
        opt.predict_order_only = false;
      } else if (a == "--no-predict") {
        opt.predict = false;
      } else if (a == "--checkpoint-cost") {
        opt.checkpoint_cost = parse_time(a, value());
      } else if (a == "--restart-cost") {
        opt.restart_cost = parse_time(a, value());
      } else if (a == "--split-factor") {
        std::string v = value();
        char* end = nullptr;
        double p = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(p > 0 && p <= 1))
          throw UsageError("--split-factor: '" + v + "' is not a number in (0, 1]");
        opt.sched.planner.checkpoint_split = p;
      } else if (a == "--split-threshold") {
        opt.sched.planner.checkpoint_threshold = parse_time(a, value());
      } else if (a == "--reserve-depth") {
        opt.sched.planner.reserve_depth = static_cast<int>(parse_int(a, value(), 1, 1 << 20));
      } else if (a == "--preempt") {
        if (has_eq) throw UsageError("--preempt takes no value");
        preempt = 1;
      } else if (a == "--no-preempt") {
        preempt = 0;
      } else if (a == "--preempt-factor") {
        std::string v = value();
        char* end = nullptr;
        double f = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(f >= 1 && f <= 1e6))
          throw UsageError("--preempt-factor: '" + v + "' is not a number in [1, 1e6]");
        opt.sched.preempt.factor = f;
      } else if (a == "--preempt-max") {
        opt.sched.preempt.max_preemptors = static_cast<int>(parse_int(a, value(), 0, 1 << 20));
      } else if (a == "--preempt-min-wait") {
        opt.sched.preempt.min_wait = parse_time(a, value());
      } else if (a == "--preempt-max-requeues") {
        opt.sched.preempt.max_requeues = static_cast<int>(parse_int(a, value(), 0, 1 << 20));
      } else if (a == "--no-preempt-aged") {
        opt.sched.preempt.aged_preempt = false;
      } else if (a == "--preempt-min-left") {
        opt.sched.preempt.min_left = parse_time(a, value());
      } else if (a == "--nodes") {
        opt.nodes = static_cast<int>(parse_int(a, value(), 1, 1 << 20));
      } else if (a == "--cores") {
        opt.cores = static_cast<int>(parse_int(a, value(), 1, 4096));
      } else if (a == "--max-jobs") {
        opt.max_jobs = static_cast<std::size_t>(parse_int(a, value(), 1, 1LL << 40));
      } else if (a == "--seed") {
        opt.seed = static_cast<std::uint64_t>(parse_int(a, value(), 0, (1LL << 62)));
      } else if (a == "--checkpointable") {
        std::string v = value();
        char* end = nullptr;
        double f = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(f >= 0 && f <= 1))
          throw UsageError("--checkpointable: '" + v + "' is not a fraction in [0, 1]");
        opt.checkpointable = f;
      } else if (a == "--checkpoint-budget") {
        std::string v = value();
        char* end = nullptr;
        double f = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || !(f >= 0 && f <= 1))
          throw UsageError("--checkpoint-budget: '" + v + "' is not a fraction in [0, 1]");
        opt.checkpoint_budget = f;
      } else if (a == "--starts") {
        starts_path = value();
      } else if (a == "--report") {
        report_path = value();
      } else if (a == "--report-json") {
        report_json_path = value();
      } else if (a == "--gantt") {
        gantt_path = value();
      } else if (a == "--from") {
        from = parse_time(a, value());
      } else if (a == "--to") {
        to = parse_time(a, value());
      } else if (a == "--monitor") {
        monitor_path = value();
        if (monitor_path.empty()) throw UsageError("--monitor: empty file name");
      } else if (a == "--max-reservation") {
        max_reservation = static_cast<int>(parse_int(a, value(), 0, 1 << 20));
      } else if (a == "--reserve-min-procs") {
        reserve_min_procs = static_cast<int>(parse_int(a, value(), 1, 1 << 24));
      } else if (a == "--reserve-all") {
        if (has_eq) throw UsageError("--reserve-all takes no value");
        reserve_all = true;
      } else if (a == "--default-duration") {
        default_duration = parse_time(a, value());
        if (default_duration < 1) throw UsageError("--default-duration: must be at least 1 s");
      } else if (a == "--projects") {
        projects_path = value();
      } else if (a == "--nci") {
        if (has_eq) throw UsageError("--nci takes no value");
        nci = true;
      } else if (a == "--pending-threshold") {
        pending_threshold = parse_time(a, value());
      } else if (a == "--start-window") {
        start_window = parse_time(a, value());
      } else if (a == "--resume-window") {
        resume_window = parse_time(a, value());
      } else if (a == "--window-quantum") {
        window_quantum = parse_time(a, value());
      } else if (a == "--pba-max-requeues") {
        pba_max_requeues = static_cast<int>(parse_int(a, value(), 0, 1 << 20));
      } else if (a.size() > 1 && a[0] == '-') {
        throw UsageError("unknown option '" + a + "' (see corral sim --help)");
      } else if (trace_path.empty()) {
        trace_path = a;
      } else {
        throw UsageError("only one TRACE may be given (got '" + trace_path + "' and '" + a + "')");
      }
    }
    if (trace_path.empty()) throw UsageError("missing TRACE (see corral sim --help)");
    if ((from >= 0 || to >= 0) && gantt_path.empty()) throw UsageError("--from/--to need --gantt FILE.svg");
    if (from >= 0 && to >= 0 && to <= from) throw UsageError("--to must be after --from");
    if ((!report_path.empty() || !report_json_path.empty()) && projects_path.empty())
      throw UsageError("--report/--report-json need --projects FILE");
    if ((nci || pending_threshold >= 0) && projects_path.empty())
      throw UsageError(std::string(nci ? "--nci" : "--pending-threshold") + " needs --projects FILE");
    if (start_window >= 0 && !nci) throw UsageError("--start-window needs --nci");
    if (window_quantum >= 0 && start_window < 0) throw UsageError("--window-quantum needs --start-window");
    if (resume_window >= 0 && start_window < 0) throw UsageError("--resume-window needs --start-window");
    if (pba_max_requeues >= 0 && projects_path.empty()) throw UsageError("--pba-max-requeues needs --projects FILE");
    if (reserve_all && reserve_min_procs > 0) throw UsageError("give either --reserve-all or --reserve-min-procs N, not both");
    if (reserve_all) reserve_min_procs = 1;
    // Only the reserve policy reads max_reservation and a job's -R y.
    if (policy != "reserve" && (max_reservation >= 0 || reserve_min_procs > 0))
      throw UsageError(std::string(max_reservation >= 0 ? "--max-reservation" : reserve_all ? "--reserve-all" : "--reserve-min-procs") +
                       " needs --policy reserve (other policies ignore -R y)");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "corral sim: %s\n", e.what());
    return 2;
  }

  opt.sched.order.policy = order;
  opt.sched.preempt.enabled = preempt >= 0 ? preempt == 1 : policy == "checkpoint" && kDefaultPreemptWithCheckpoint;
  opt.sched.planner.backfill = parse_policy(policy);
  opt.record_segments = !gantt_path.empty();
  if (max_reservation >= 0) opt.sched.planner.max_reservation = max_reservation;
  if (default_duration > 0) opt.sched.planner.default_duration = default_duration;
  if (reserve_min_procs > 0 || default_duration > 0) {
    opt.on_arrival = [reserve_min_procs, default_duration](Job& j, const sim::SwfJob& s) {
      if (reserve_min_procs > 0) j.reserve = s.procs >= reserve_min_procs;
      // No requested time in the trace: the job has no walltime (a Grid
      // Engine job without h_rt), so the planner assumes default_duration.
      // Its estimate says the same (unless predicted): the simulator expects
      // a running job to end at its start + estimate.
      if (default_duration > 0 && !s.requested) {
        j.walltime = 0;
        if (j.estimate <= 0) j.estimate = default_duration;
      }
    };
  }
  if (isatty(STDERR_FILENO)) opt.progress = progress_bar;

  sim::SwfTrace trace;
  try {
    // With --nodes the machine is the one given: larger jobs are skipped.
    trace = sim::read_swf(trace_path, opt.nodes > 0 ? opt.nodes * opt.cores : 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral sim: %s\n", e.what());
    return 2;
  }
  if (trace.bad_lines > 0)
    std::fprintf(stderr, "corral sim: %zu bad line(s) skipped in '%s' (first: %s)\n", trace.bad_lines,
                 trace_path.c_str(), trace.first_bad.c_str());
  if (trace.jobs.empty()) {
    std::fprintf(stderr, "corral sim: '%s' has no usable job\n", trace_path.c_str());
    return 2;
  }

  if (!projects_path.empty()) {
    std::ifstream f(projects_path, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "corral sim: --projects: cannot read '%s': %s\n", projects_path.c_str(),
                   std::strerror(errno));
      return 2;
    }
    std::ostringstream text;
    text << f.rdbuf();
    // Relative weeks (+N) and deadlines count from the trace's first submit.
    pba::PlanParseOptions po;
    po.origin = trace.jobs.front().submit;
    pba::PlanParseResult pr = pba::parse_plan(text.str(), po);
    if (!pr.ok()) {
      for (const std::string& e : pr.errors)
        std::fprintf(stderr, "corral sim: %s: %s\n", projects_path.c_str(), e.c_str());
      return 2;
    }
    if (pr.plan.projects.empty()) {
      std::fprintf(stderr, "corral sim: %s: no project declared\n", projects_path.c_str());
      return 2;
    }
    sim::use_projects(opt, pr.plan, nci);
    opt.weekly_reports = !report_path.empty() || !report_json_path.empty();
    if (pending_threshold >= 0) opt.sched.pba.preempt_after = pending_threshold;
    if (start_window >= 0) opt.sched.nci.window_wait = start_window;
    // With a time window NCI lets PBA's allocated class use the cores
    // suspended jobs hold (nci.cpp), so PBA counts them free.
    if (start_window > 0) opt.sched.pba.suspended_hold_cores = false;
    if (window_quantum >= 0) opt.sched.nci.window_quantum = window_quantum;
    if (resume_window >= 0) opt.sched.nci.resume_window = resume_window;
    if (pba_max_requeues >= 0) opt.sched.pba.max_requeues = pba_max_requeues;
  }

  // The schedule file is opened before the replay: a bad path fails at once.
  std::FILE* monitor = nullptr;
  if (!monitor_path.empty()) {
    monitor = std::fopen(monitor_path.c_str(), "w");
    if (!monitor) {
      std::fprintf(stderr, "corral sim: --monitor: cannot write '%s': %s\n", monitor_path.c_str(), std::strerror(errno));
      return 2;
    }
    opt.on_monitor = [monitor](const std::vector<std::string>& lines) {
      for (const std::string& l : lines) {
        std::fwrite(l.data(), 1, l.size(), monitor);
        std::fputc('\n', monitor);
      }
    };
  }

  try {
    sim::SimResult r = sim::simulate(trace, opt);
    if (monitor) {
      // The specification's file ends with the separator too: each pass's
      // block is followed by one (a reader may split on it either way).
      std::fputs("::::::::\n", monitor);
      const bool bad = std::ferror(monitor) != 0;
      if (std::fclose(monitor) != 0 || bad) {
        monitor = nullptr;
        throw std::runtime_error("--monitor: cannot write '" + monitor_path + "'");
      }
      monitor = nullptr;
    }
    sim::JsonFields labels = {
        {"trace", sim::json_string(trace_path)},
        {"policy", sim::json_string(policy)},
        {"order", sim::json_string(order)},
        {"aging", std::to_string(opt.sched.order.aging)},
        {"aging_wide", std::to_string(opt.sched.order.aging_wide)},
        {"wide_fraction", json_num(opt.sched.order.wide_fraction)},
        {"split_factor", json_num(opt.sched.planner.checkpoint_split)},
        {"reserve_depth", std::to_string(opt.sched.planner.reserve_depth)},
        {"predict", opt.predict ? "true" : "false"},
        {"predictor", sim::json_string(sim::predict_kind_name(opt.predictor))},
        {"predict_order_only", opt.predict_order_only ? "true" : "false"},
        {"preempt", opt.sched.preempt.enabled ? "true" : "false"},
        {"repredict", opt.repredict && opt.predict ? "true" : "false"},
        {"checkpointable", json_num(opt.checkpointable)},
        {"seed", std::to_string(opt.seed)},
        {"checkpoint_budget", json_num(opt.checkpoint_budget)},
        {"checkpoint_cost", std::to_string(opt.checkpoint_cost)},
        {"restart_cost", std::to_string(opt.restart_cost)},
        {"bad_lines", std::to_string(trace.bad_lines)},
        {"skipped", std::to_string(trace.skipped)},
    };
    if (policy == "reserve") {
      labels.emplace_back("max_reservation", std::to_string(opt.sched.planner.max_reservation));
      labels.emplace_back("reserve_min_procs", std::to_string(reserve_min_procs));
    }
    if (default_duration > 0) labels.emplace_back("default_duration", std::to_string(default_duration));
    if (!projects_path.empty()) {
      labels.emplace_back("projects_file", sim::json_string(projects_path));
      labels.emplace_back("nci", nci ? "true" : "false");
    }
    std::printf("%s\n", sim::to_json(r, labels).c_str());
    if (!starts_path.empty()) write_file(starts_path, sim::starts_csv(r));
    if (!report_path.empty()) {
      std::string text;
      for (const NciReport& w : r.weekly) text += render_report_table(w) + "\n";
      write_file(report_path, text);
    }
    if (!report_json_path.empty()) {
      std::string text = "[";
      for (std::size_t i = 0; i < r.weekly.size(); ++i)
        text += (i ? ",\n" : "\n") + render_report_json(r.weekly[i]);
      write_file(report_json_path, text + "\n]\n");
    }
    if (!gantt_path.empty()) {
      Time f = from >= 0 ? from : trace.jobs.front().submit;
      Time t = to >= 0 ? to : f + 86400;
      write_file(gantt_path, sim::gantt_svg(r, f, t));
    }
    if (r.unstarted > 0)
      std::fprintf(stderr, "corral sim: %zu job(s) never started (the planner left them pending)\n", r.unstarted);
  } catch (const std::invalid_argument& e) {
    if (monitor) std::fclose(monitor);
    std::fprintf(stderr, "corral sim: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    if (monitor) std::fclose(monitor);
    std::fprintf(stderr, "corral sim: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace corral::cli
