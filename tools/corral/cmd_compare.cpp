// `corral sim compare TRACE --policies A,B,...`: replays one trace under
// several policies, each as `corral sim TRACE --policy NAME` would, and
// prints their figures side by side: a table, one JSON object (--json), a
// picture (--svg FILE: grouped bars and the timelines stacked).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/json_text.hpp"

#include "coordinator/sim/pictures/compare.hpp"
#include "coordinator/sim/pictures/svg.hpp"
#include "coordinator/sim/swf.hpp"
#include "tools/cli_args.hpp"
#include "tools/cli_error.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/option_values.hpp"
#include "tools/corral/sim_pictures.hpp"
#include "tools/corral/sim_policy.hpp"

namespace corral::cli {

namespace {

const char* kCompareHelp =
    "usage: corral sim compare TRACE [--policies A,B,...] [--svg FILE] [--json]\n"
    "\n"
    "Replays one Standard Workload Format trace under each policy, as\n"
    "'corral sim TRACE --policy NAME' does, and prints their figures side by\n"
    "side: mean and max wait, mean bounded slowdown, utilization, checkpoints.\n"
    "\n"
    "options:\n"
    "  --policies LIST   policies, comma-separated, any 'corral sim --policy' takes\n"
    "                    (default: easy and corral sim's default)\n"
    "  --svg FILE        also draw the figures as grouped bars and each policy's\n"
    "                    utilization and queue over time, stacked\n"
    "  --json            one JSON object instead of the table\n"
    "  --max-jobs N      replay only the first N usable jobs\n"
    "  --nodes N         machine nodes (default: the trace's MaxProcs, else MaxNodes)\n"
    "  --cores C         cores per node (default 1)\n"
    "  --help            this text\n";

struct Args {
  std::string trace;
  std::vector<std::string> policies;
  std::string svg;
  bool json = false;
  std::size_t max_jobs = 0;
  int nodes = 0, cores = 1;
};

std::vector<std::string> split_policies(const std::string& list) {
  std::vector<std::string> out;
  std::size_t a = 0;
  for (;;) {
    const std::size_t b = list.find(',', a);
    const std::string name = list.substr(a, b == std::string::npos ? std::string::npos : b - a);
    if (name.empty()) refuse("--policies: empty name in '" + list + "'");
    for (const std::string& seen : out)
      if (seen == name) refuse("--policies: '" + name + "' given twice");
    sim::SimOptions probe;
    try {
      sim_policy_options(name, probe);  // an unknown name fails here, before any replay
    } catch (const std::invalid_argument& e) {
      refuse(e.what());
    }
    out.push_back(name);
    if (b == std::string::npos) return out;
    a = b + 1;
  }
}

// Parses the command line; false after --help. Throws CLI::ParseError.
bool parse(int argc, char** argv, Args& a) {
  CLI::App app("corral sim compare");
  auto value = [&app](const char* name, const char* type, std::function<void(const std::string&)> f) {
    app.add_option_function<std::string>(name, std::move(f))->type_name(type);
  };
  bool help = false;
  std::vector<std::string> traces;
  app.set_help_flag();  // kCompareHelp is the help text
  app.add_flag("-h,--help", help)->disable_flag_override();
  app.add_option("TRACE", traces);
  value("--policies", "LIST", [&a](const std::string& v) { a.policies = split_policies(v); });
  value("--svg", "FILE", [&a](const std::string& v) {
    if (v.empty()) refuse("--svg: empty file name");
    a.svg = v;
  });
  app.add_flag("--json", a.json)->disable_flag_override();
  value("--max-jobs", "N", [&a](const std::string& v) { a.max_jobs = static_cast<std::size_t>(whole("--max-jobs", v, 1, 1LL << 40)); });
  value("--nodes", "N", [&a](const std::string& v) { a.nodes = static_cast<int>(whole("--nodes", v, 1, 1 << 20)); });
  value("--cores", "C", [&a](const std::string& v) { a.cores = static_cast<int>(whole("--cores", v, 1, 4096)); });
  try {
    cli_parse(app, cli_args(argc, argv));
  } catch (const CLI::ExtrasError& e) {
    throw CLI::ValidationError(usage_error(e) + " (see corral sim compare --help)");
  }
  if (help) {
    std::fputs(kCompareHelp, stdout);
    return false;
  }
  if (traces.empty()) refuse("missing TRACE (see corral sim compare --help)");
  if (traces.size() > 1) refuse("only one TRACE may be given (got '" + traces[0] + "' and '" + traces[1] + "')");
  a.trace = traces[0];
  if (a.policies.empty()) {
    a.policies = {"easy"};
    if (sim_default_policy() != "easy") a.policies.push_back(sim_default_policy());
  }
  return true;
}

std::string table(const std::vector<sim::PolicyRun>& runs) {
  std::string o;
  char b[256];
  std::snprintf(b, sizeof b, "%-14s %10s %10s %10s %12s %12s\n", "policy", "mean wait", "max wait", "mean bsld",
                "utilization", "checkpoints");
  o += b;
  for (const sim::PolicyRun& p : runs) {
    const sim::SimResult& r = p.result;
    std::snprintf(b, sizeof b, "%-14s %10s %10s %10.2f %10.1f %% %12zu\n", p.policy.c_str(),
                  sim::svg::duration_text(static_cast<Time>(r.mean_wait + 0.5)).c_str(),
                  sim::svg::duration_text(r.max_wait).c_str(), r.mean_bsld, 100 * r.utilization, r.checkpoints);
    o += b;
  }
  return o;
}

std::string json(const Args& a, const std::vector<sim::PolicyRun>& runs) {
  nlohmann::ordered_json o = {{"trace", a.trace}};
  if (!runs.empty()) {
    o["jobs"] = runs.front().result.jobs;
    o["machine_procs"] = runs.front().result.machine_procs;
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const sim::PolicyRun& p : runs) {
    const sim::SimResult& r = p.result;
    list.push_back({{"policy", p.policy},
                    {"mean_wait", r.mean_wait},
                    {"max_wait", r.max_wait},
                    {"mean_bsld", r.mean_bsld},
                    {"utilization", r.utilization},
                    {"checkpoints", r.checkpoints},
                    {"preemptions", r.preemptions},
                    {"unstarted", r.unstarted}});
  }
  o["policies"] = std::move(list);
  return json_text(o);
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args a;
  sim::SwfTrace trace;
  try {
    if (!parse(argc, argv, a)) return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "corral sim compare: %s\n", usage_error(e).c_str());
    return 2;
  }
  try {
    trace = sim::read_swf(a.trace, a.nodes > 0 ? a.nodes * a.cores : 0);
    if (trace.jobs.empty()) throw std::invalid_argument("'" + a.trace + "' has no usable job");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral sim compare: %s\n", e.what());
    return 2;
  }
  try {
    std::vector<sim::PolicyRun> runs;
    for (const std::string& p : a.policies) {
      sim::SimOptions opt;
      sim_policy_options(p, opt);
      opt.nodes = a.nodes;
      opt.cores = a.cores;
      opt.max_jobs = a.max_jobs;
      opt.record_segments = !a.svg.empty();
      runs.push_back({p, sim::simulate(trace, opt)});
    }
    if (a.json) {
      std::printf("%s\n", json(a, runs).c_str());
    } else {
      std::printf("%s: %zu jobs on %d processors\n%s", base_name(a.trace).c_str(), runs.front().result.jobs,
                  runs.front().result.machine_procs, table(runs).c_str());
    }
    if (!a.svg.empty()) {
      sim::CompareOptions co;
      co.unix_start = trace.unix_start;
      co.title = base_name(a.trace);
      write_text_file(a.svg, sim::compare_svg(runs, co));
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "corral sim compare: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral sim compare: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace corral::cli
