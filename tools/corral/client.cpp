#include "tools/corral/client.hpp"
#include "tools/submit/array_values.hpp"
#include "tools/submit/directives.hpp"
#include "proto/spec_check.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "coordinator/json_text.hpp"
#include "coordinator/names.hpp"

#include "tools/cli_args.hpp"
#include "tools/cli_error.hpp"

namespace corral::cli {
namespace {

using Json = nlohmann::ordered_json;

// Seconds and usage to the microsecond; a non-finite value as 0.
double micro(double d) { return std::isfinite(d) ? std::round(d * 1e6) / 1e6 : 0.0; }

// The text, or null when empty.
Json text_or_null(const std::string& s) { return s.empty() ? Json() : Json(s); }

Json job_json(const proto::JobInfo& j) {
  Json o;
  o["id"] = j.id;
  o["name"] = j.name;
  o["user"] = j.user;
  o["uid"] = j.uid;
  o["queue"] = j.queue;
  o["project"] = j.project;
  o["state"] = j.state;
  o["exit_code"] = j.state == "ended" && j.exit_code >= 0 ? Json(j.exit_code) : Json();
  o["end_reason"] = text_or_null(j.end_reason);
  o["submit_time"] = micro(j.submit_time);
  o["start_time"] = j.start_time > 0 ? Json(micro(j.start_time)) : Json();
  o["end_time"] = j.end_time > 0 ? Json(micro(j.end_time)) : Json();
  o["walltime"] = j.walltime;
  o["ncpus"] = j.ncpus;
  o["mem_mb"] = j.mem_mb;
  o["jobfs_mb"] = j.jobfs_mb;
  o["cores"] = j.cores;
  o["cpu_seconds"] = micro(j.cpu_seconds);
  o["rss_mb"] = j.rss_mb;
  o["requeues"] = j.requeues;
  o["stdout"] = j.stdout_path;
  o["stderr"] = j.stderr_path;
  o["comment"] = j.comment;
  o["pe"] = text_or_null(j.pe);
  o["slots_min"] = j.slots_min > 0 ? j.slots_min : j.ncpus;
  o["slots_max"] = j.slots_max == proto::kSlotsUnbounded ? Json() : Json(j.slots_max > 0 ? j.slots_max : j.ncpus);
  o["slots"] = j.slots > 0 ? Json(j.slots) : Json();
  o["suspended_seconds"] = micro(j.suspended_seconds);
  o["flow_step"] = text_or_null(j.flow_step);
  o["preempt"] = text_or_null(j.preempt);
  o["backfilled"] = j.backfilled;
  o["su_charged"] = micro(j.su_charged);  // NCI service units, every run (0 without charging)
  o["su_rate"] = micro(j.su_rate);        // units an hour of running costs now
  o[proto::field::kPlannedStart] = j.planned_start > 0 ? Json(micro(j.planned_start)) : Json();
  o[proto::field::kWaitReason] = text_or_null(j.wait_reason);
  o[proto::field::kWaitDetail] = text_or_null(j.wait_detail);
  o[proto::field::kDepend] = Json::array();
  for (const proto::Dependency& d : j.depend) o[proto::field::kDepend].push_back(Json{{"type", d.type}, {"job", d.job}});
  // A task of an array (array_id, array_index), or an array (its range and its tasks' states).
  o["array_id"] = j.array_id ? Json(j.array_id) : Json();
  o["array_index"] = j.array_id ? Json(j.array_index) : Json();
  if (j.array.on()) {
    o["array"] = Json{{"first", j.array.first}, {"last", j.array.last}, {"step", j.array.step},
                      {"max_running", j.array.max_running > 0 ? Json(j.array.max_running) : Json()}};
    const proto::ArrayCounts& n = j.array_counts;
    if (!j.array_id)
      o["array_tasks"] = Json{{"queued", n.queued}, {"pending", n.pending}, {"running", n.running},
                              {"ended", n.ended}, {"failed", n.failed}};
  }
  // Every run (a requeue, checkpoint or preemption ends one "preempted"; the job runs again).
  o["runs"] = Json::array();
  for (const proto::RunInfo& r : j.runs)
    o["runs"].push_back(Json{{"start", micro(r.start)},
                             {"end", r.end > 0 ? Json(micro(r.end)) : Json()},
                             {"end_reason", text_or_null(r.end_reason)},
                             {"exit_code", r.end > 0 && r.exit_code >= 0 ? Json(r.exit_code) : Json()},
                             {"comment", r.comment}});
  return o;
}

}  // namespace

namespace {

// Runs `app` over args (without the command's name): true when --help was
// asked for. CLI11's refusals become UsageError in the project's words; an
// unknown option points at the command's --help.
bool parse_or_help(CLI::App& app, const std::string& cmd, const std::vector<std::string>& args) {
  try {
    cli_parse(app, args);
    return false;
  } catch (const CLI::CallForHelp&) {
    return true;
  } catch (const CLI::ParseError& e) {
    std::string why = usage_error(e);
    if (why.rfind("unknown option", 0) == 0) why += " (see corral " + cmd + " --help)";
    throw UsageError(why);
  }
}

// A submit command line with the qsub spellings CLI11 does not read taken
// care of: the single-dash long options ("-pe NAME RANGE", "-now y", "-hold_jid ID",
// "-cwd") are taken out (CLI11 would read "-pe" as -p with the value "e"), and a short
// option's "-q=VALUE" becomes "-qVALUE". Another option's value is left as it is
// ("-N -pe" names a job "-pe"), and so is everything after "--".
struct QsubLine {
  std::vector<std::string> args;                            // for CLI11
  std::vector<std::pair<std::string, std::string>> pe;      // each -pe's NAME and RANGE
  std::vector<std::string> now;                             // each -now's y or n
  std::vector<std::string> hold_jid;                        // each -hold_jid's ids
  std::vector<std::string> tc;                              // each -tc's limit
};

QsubLine qsub_spelling(const std::vector<std::string>& args, const CLI::App& app) {
  QsubLine line;
  std::vector<std::string>& out = line.args;
  const std::size_t n = args.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::string a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (a == "-pe") {
      if (i + 2 >= n) throw UsageError("-pe needs a parallel environment name and a slot range, e.g. -pe smp 2-8");
      line.pe.emplace_back(args[i + 1], args[i + 2]);
      i += 2;
      continue;
    }
    if (a == "-now" || a == "-hold_jid" || a == "-tc") {
      if (i + 1 >= n)
        throw UsageError(a == "-now" ? "-now needs y or n"
                         : a == "-tc" ? "-tc needs the number of tasks that may run at once"
                                      : "-hold_jid needs a job id (or ID,ID...)");
      (a == "-now" ? line.now : a == "-tc" ? line.tc : line.hold_jid).push_back(args[++i]);
      continue;
    }
    if (a == "-cwd") continue;  // Grid Engine's "run where submitted": every job does
    const bool is_long = a.rfind("--", 0) == 0, is_short = !is_long && a.size() > 1 && a[0] == '-';
    const CLI::Option* o = is_long && a.find('=') == std::string::npos ? app.get_option_no_throw(a)
                           : is_short ? app.get_option_no_throw(a.substr(0, 2))
                                      : nullptr;
    const int values = o ? o->get_items_expected_min() : 0;
    if (is_short && values > 0 && a.size() > 2) {
      if (a[2] == '=') a.erase(2, 1);
      out.push_back(a);  // the value is attached
      if (a.size() == 2) out.emplace_back();  // "-q=": an empty one
      continue;
    }
    out.push_back(a);
    for (int k = 0; k < values && i + 1 < n; ++k) out.push_back(args[++i]);
  }
  return line;
}

// What `corral submit` has read. The options' values are applied in the
// order given once the whole line has parsed (so --help and unknown options
// are answered first), then -pe.
struct SubmitParse {
  SubmitArgs a;
  std::vector<std::function<void()>> steps;
  std::vector<std::string> scripts;
  std::optional<std::string> wrap;
  bool have_ncpus = false;  // -l ncpus= and -pe both name the cpu count
};

void pe_option(proto::JobSpec& s, const std::string& name, const std::string& range) {
  if (name.rfind("-", 0) == 0 || range.rfind("--", 0) == 0)
    throw UsageError("-pe needs a parallel environment name and a slot range, e.g. -pe smp 2-8 (got '-pe " + name +
                     " " + range + "')");
  apply_pe(name, range, s);
}

void submit_options(CLI::App& app, SubmitParse& p) {
  proto::JobSpec& s = p.a.spec;
  auto value = [&app, &p](const char* name, std::function<void(const std::string&)> apply) {
    app.add_option_function<std::string>(name, [&p, apply](const std::string& v) { p.steps.push_back([apply, v] { apply(v); }); })
        ->trigger_on_parse();
  };
  app.set_help_flag("-h,--help");
  value("-l", [&p](const std::string& v) { p.have_ncpus |= apply_resources(v, p.a.spec); });
  value("-q", [&s](const std::string& v) { s.queue = v; });
  value("-P", [&s](const std::string& v) { apply_project(s, v); });
  value("--preempt", [&s](const std::string& v) { s.preempt = preempt_choice("--preempt", v); });
  app.add_flag_callback("-c,--checkpointable", [&s] { s.checkpointable = true; });
  value("-N", [&s](const std::string& v) {
    if (v.empty()) throw UsageError("-N: the job name is empty");
    s.name = v;
  });
  value("-o", [&s](const std::string& v) { s.stdout_path = v; });
  value("-e", [&s](const std::string& v) { s.stderr_path = v; });
  value("-R", [&s](const std::string& v) { s.reserve = yes_no("-R", v); });
  value("-j", [&s](const std::string& v) { apply_join(s, v); });
  value("-W", [&s](const std::string& v) { apply_w(s, v); });
  value("-J", [&s](const std::string& v) { apply_array(s, "-J", v); });
  value("-t", [&s](const std::string& v) { apply_array(s, "-t", v); });
  value("--socket", [&p](const std::string& v) { p.a.socket = v; });
  value("--wrap", [&p](const std::string& v) { p.wrap = v; });
  app.add_option("SCRIPT", p.scripts);
}

// The script file's text ("-": stdin). Throws UsageError.
std::string read_script(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw UsageError("cannot read script '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw UsageError("script '" + path + "' is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read script '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The job's script: the --wrap command or the script file.
void set_script(SubmitParse& p) {
  proto::JobSpec& s = p.a.spec;
  if (p.scripts.size() > 1)
    throw UsageError("more than one script given ('" + p.scripts[0] + "' and '" + p.scripts[1] + "')");
  const std::string path = p.scripts.empty() ? "" : p.scripts[0];
  if (p.wrap && !path.empty()) throw UsageError("give a script or --wrap, not both");
  if (p.wrap) {
    if (p.wrap->empty()) throw UsageError("--wrap needs a command");
    s.script = "#!/bin/sh\n" + *p.wrap + "\n";
    s.script_name = "--wrap";
    if (s.name.empty()) s.name = "wrap";
    return;
  }
  if (path.empty()) throw UsageError("missing job script (give a file, '-' for stdin, or --wrap 'command')");
  const std::string text = read_script(path);
  if (text.empty()) throw UsageError("script '" + path + "' is empty");
  if (text.size() > proto::kMaxFrame / 2) throw UsageError("script '" + path + "' is too large");
  s.script = text;
  s.script_name = path;
  if (s.name.empty()) {
    std::string base = path == "-" ? "STDIN" : path.substr(path.rfind('/') + 1);
    s.name = base.empty() ? "job" : base;
  }
}

}  // namespace

Common parse_common(const char* cmd, int argc, char** argv, bool json_ok, bool reason_ok) {
  Common c;
  CLI::App app;
  app.set_help_flag("-h,--help");
  app.add_option("--socket", c.socket)->type_name("PATH")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  if (json_ok) app.add_flag("--json", c.json)->disable_flag_override();
  if (reason_ok) app.add_option("--reason", c.reason)->type_name("TEXT")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("ARGS", c.args);
  c.help = parse_or_help(app, cmd, cli_args(argc, argv));
  if (c.socket.empty()) c.socket = default_socket();
  return c;
}

ReportArgs parse_report(int argc, char** argv) {
  ReportArgs r;
  CLI::App app;
  app.set_help_flag("-h,--help");
  app.add_option("--socket", r.socket)->type_name("PATH")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--week", r.week)->type_name("W")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--project", r.project)->type_name("P")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--json", r.json)->disable_flag_override();
  std::vector<std::string> extra;
  app.add_option("ARGS", extra);
  r.help = parse_or_help(app, "report", cli_args(argc, argv));
  if (r.help) return r;
  if (!extra.empty()) throw UsageError("unexpected argument '" + extra[0] + "' (--week W and --project P take the choices)");
  if (app.count("--week") && r.week.empty()) throw UsageError("--week needs a week: a number or an ISO week such as 2026-W48");
  if (app.count("--project") && r.project.empty()) throw UsageError("--project needs a project name");
  if (r.socket.empty()) r.socket = default_socket();
  return r;
}

StatArgs parse_stat(int argc, char** argv) {
  StatArgs a;
  CLI::App app;
  app.set_help_flag("-h,--help");
  auto last = CLI::MultiOptionPolicy::TakeLast;
  app.add_option("--socket", a.socket)->type_name("PATH")->multi_option_policy(last);
  app.add_option("-u", a.filter.user)->type_name("USER")->multi_option_policy(last);
  app.add_option("-P", a.filter.project)->type_name("PROJECT")->multi_option_policy(last);
  app.add_option("-s", a.filter.states)->type_name("STATE")->multi_option_policy(last);
  app.add_flag("--mine", a.filter.mine)->disable_flag_override();
  app.add_flag("-t,--tasks", a.filter.tasks)->disable_flag_override();
  app.add_flag("--json", a.json)->disable_flag_override();
  std::vector<std::string> ids;
  app.add_option("JOBID", ids);
  a.help = parse_or_help(app, "stat", cli_args(argc, argv));
  if (a.help) return a;
  if (ids.size() > 1) throw UsageError("at most one job id");
  if (!ids.empty()) {
    const JobRef ref = parse_job_ref(ids[0]);
    a.filter.id = ref.id;
    a.filter.index = ref.index;
  }
  for (const char* o : {"-u", "-P", "-s"})
    if (app.count(o) && (o[1] == 'u' ? a.filter.user : o[1] == 'P' ? a.filter.project : a.filter.states).empty())
      throw UsageError(std::string(o) + " needs a value");
  if (std::string why = proto::check_states(a.filter.states); !why.empty()) throw UsageError("-s: " + why);
  if (a.filter.id && (!a.filter.user.empty() || !a.filter.project.empty() || !a.filter.states.empty() || a.filter.mine))
    throw UsageError("give a job id or filters (-u, -P, -s, --mine), not both");
  if (a.socket.empty()) a.socket = default_socket();
  return a;
}

ControlArgs parse_control(int argc, char** argv) {
  ControlArgs c;
  c.action = argc > 0 ? argv[0] : "";
  Common common = parse_common(c.action.c_str(), argc, argv, false);
  c.socket = common.socket;
  c.help = common.help;
  if (c.help) return c;
  for (const auto& a : common.args) c.ids.push_back(parse_job_ref(a));
  if (c.ids.empty()) throw UsageError("missing job id");
  return c;
}

namespace {

// Applies the parsed steps and -pe/-now of one line (the directives' or the command line's).
void apply_line(SubmitParse& p, const std::vector<std::function<void()>>& steps, const QsubLine& line) {
  for (const auto& step : steps) step();
  if (line.pe.size() > 1) throw UsageError("-pe given twice");
  for (const auto& [name, range] : line.pe) pe_option(p.a.spec, name, range);
  if (line.now.size() > 1) throw UsageError("-now given twice");
  for (const auto& v : line.now) p.a.spec.immediate = yes_no("-now", v);
  for (const auto& v : line.hold_jid) apply_hold_jid(p.a.spec, v);
  for (const auto& v : line.tc) apply_task_limit(p.a.spec, v);
}

// The script's directives (tools/submit/directives.hpp), then the command line again on top of
// them (the command line wins, as qsub's; its dependencies replace theirs).
void apply_directives(SubmitParse& p, const std::vector<std::function<void()>>& cmd_steps, const QsubLine& cmd_line) {
  DirectiveResult d = parse_directives(p.a.spec.script, p.a.spec.script_name == "-" ? "stdin" : p.a.spec.script_name);
  if (!d.ok()) throw UsageError(d.error);
  if (d.directives.lines == 0) return;
  const proto::JobSpec kept = p.a.spec;
  p.a.spec = d.directives.spec;
  p.have_ncpus = d.directives.have_ncpus;
  p.a.spec.depend.clear();
  apply_line(p, cmd_steps, cmd_line);
  if (p.a.spec.depend.empty()) p.a.spec.depend = d.directives.spec.depend;
  p.a.spec.script = kept.script;
  p.a.spec.script_name = kept.script_name;
  if (p.a.spec.name.empty()) p.a.spec.name = kept.name;
}

}  // namespace

SubmitArgs parse_submit(int argc, char** argv) {
  SubmitParse p;
  CLI::App app;
  submit_options(app, p);
  const QsubLine line = qsub_spelling(cli_args(argc, argv), app);
  p.a.help = parse_or_help(app, "submit", line.args);
  if (p.a.help) return p.a;
  apply_line(p, p.steps, line);
  set_script(p);
  if (p.a.spec.script_name != "--wrap") apply_directives(p, p.steps, line);
  if (!p.a.spec.pe.empty() && p.have_ncpus)
    throw UsageError("give either -l ncpus=N or -pe NAME RANGE, not both (the slot range is the cpu count)");
  const std::string& name = p.a.spec.name;
  if (std::string why = proto::check_job_name(name); !why.empty())
    throw UsageError(why + (name.empty() ? "" : " (-N NAME chooses another)"));
  if (p.a.socket.empty()) p.a.socket = default_socket();
  return p.a;
}

void finish_submit(proto::JobSpec& spec, const std::string& cwd, char** env) {
  spec.cwd = cwd;
  for (char** e = env; e && *e; ++e) {
    spec.env.emplace_back(*e);
    // The job's own suspend-or-requeue choice when neither --preempt nor a directive made it.
    if (spec.preempt.empty() && spec.env.back().rfind(kPreemptEnv + std::string("="), 0) == 0)
      spec.preempt = preempt_choice(kPreemptEnv, spec.env.back().substr(std::strlen(kPreemptEnv) + 1));
  }
  mode_t mask = ::umask(0);  // reading it needs setting it
  ::umask(mask);
  spec.umask = static_cast<std::int32_t>(mask);
  if (std::string why = proto::check_spec(spec); !why.empty()) throw UsageError(why);
}

std::string default_socket() {
  const char* e = std::getenv("CORRAL_SOCKET");
  return e && *e ? e : "/run/corral/corrald.sock";
}

int connect_corrald(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) throw std::runtime_error("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot reach corrald at " + path + ": " + std::strerror(err) +
                             " (is corrald running? --socket or CORRAL_SOCKET choose another)");
  }
  return fd;
}

proto::Message request(const std::string& path, const proto::Message& req) {
  int fd = connect_corrald(path);
  // A submit corrald may have made durable before it died: say so, and how to find out.
  auto lost = [&req](const std::string& what) {
    const auto* sub = std::get_if<proto::SubmitReq>(&req);
    if (!sub) return std::runtime_error(what);
    return std::runtime_error(what + ": the job may have been accepted all the same; before submitting it again, "
                              "check with `corral stat` for a job named '" + proto::printable(sub->spec.name) +
                              "' of your user");
  };
  std::string out = proto::frame(proto::encode(req));
  std::string_view rest = out;
  std::string send_err;  // corrald may have refused the connection at once: its answer is read below
  while (!rest.empty()) {
    ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      send_err = std::strerror(errno);
      break;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  proto::FrameReader rd;
  std::string frame;
  char buf[65536];
  while (!rd.next(frame)) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      if (!send_err.empty()) throw std::runtime_error("lost corrald while sending: " + send_err);
      throw lost("corrald closed the connection without answering");
    }
    rd.feed(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return proto::decode(frame);
}

std::string to_json(const proto::JobInfo& j) { return json_text(job_json(j)); }

std::string to_json(const proto::NodeStatus& n) {
  Json o;
  o["node"] = n.node;
  o["mode"] = n.mode;
  o["state"] = n.state;
  o["drain_reason"] = n.drain_reason;
  o["topology"] = n.topology;
  o["cores"] = n.cores;
  o["numa_nodes"] = n.numa_nodes;
  o["mem_mb"] = n.mem_mb;
  o["slots_total"] = n.slots_total;
  o["slots_used"] = n.slots_used;
  o["pending"] = n.pending;
  o["running"] = Json::array();
  for (const proto::JobInfo& j : n.running) o["running"].push_back(job_json(j));
  o["recent"] = Json::array();
  for (const proto::JobInfo& j : n.recent) o["recent"].push_back(job_json(j));
  o["agent_pid"] = n.agent_pid;
  o["agent_uptime"] = micro(n.agent_uptime);
  o["version"] = n.version;
  o["criu"] = Json{{"available", n.criu_available}, {"why", n.criu_why}};
  return json_text(o);
}

AcctArgs parse_acct(int argc, char** argv) {
  AcctArgs a;
  CLI::App app;
  app.set_help_flag("-h,--help");
  auto last = CLI::MultiOptionPolicy::TakeLast;
  app.add_option("--socket", a.socket)->type_name("PATH")->multi_option_policy(last);
  app.add_option("-u,--user", a.req.user)->type_name("USER")->multi_option_policy(last);
  app.add_option("-P,--project", a.req.project)->type_name("PROJECT")->multi_option_policy(last);
  app.add_option("--since", a.req.since)->type_name("T")->multi_option_policy(last);
  app.add_flag("--json", a.json)->disable_flag_override();
  std::vector<std::string> extra;
  app.add_option("ARGS", extra);
  a.help = parse_or_help(app, "acct", cli_args(argc, argv));
  if (a.help) return a;
  if (!extra.empty()) throw UsageError("unexpected argument '" + extra[0] + "' (filters: --user, --project, --since)");
  if (app.count("--user") && a.req.user.empty()) throw UsageError("--user needs a user name");
  if (app.count("--project") && a.req.project.empty()) throw UsageError("--project needs a project name");
  if (app.count("--since") && a.req.since.empty())
    throw UsageError("--since needs a time: a duration back from now (2h, 7d) or an ISO week (2026-W48)");
  if (a.socket.empty()) a.socket = default_socket();
  return a;
}

AllocArgs parse_alloc(int argc, char** argv) {
  AllocArgs a;
  CLI::App app;
  app.set_help_flag("-h,--help");
  app.add_option("--socket", a.socket)->type_name("PATH")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--json", a.json)->disable_flag_override();
  std::vector<std::string> args;
  app.add_option("ARGS", args);
  a.help = parse_or_help(app, "alloc", cli_args(argc, argv));
  if (a.help) return a;
  if (a.socket.empty()) a.socket = default_socket();
  if (args.empty()) return a;
  if (args[0] != "set") throw UsageError("unexpected argument '" + args[0] + "' (corral alloc, or corral alloc set ...)");
  if (args.size() < 4 || args.size() % 2 != 0)
    throw UsageError("usage: corral alloc set PROJECT WEEK SLOTS [WEEK SLOTS...]");
  if (args[1].empty()) throw UsageError("alloc set: empty project name");
  for (std::size_t i = 2; i < args.size(); i += 2) {
    const std::string& n = args[i + 1];
    if (n.empty() || n.size() > 6 || !std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
      throw UsageError("alloc set: slots '" + n + "' for week " + args[i] + ": expected a whole number of slots (0 removes)");
    a.req.set.push_back(proto::AllocSetting{args[1], args[i], std::stoi(n)});
  }
  return a;
}

ConsoleArgs parse_console(int argc, char** argv) {
  ConsoleArgs a;
  CLI::App app;
  app.set_help_flag("-h,--help");
  app.add_option("--socket", a.socket)->type_name("PATH")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--interval", a.interval)->type_name("SECONDS")->check(CLI::Range(0.2, 3600.0));
  a.help = parse_or_help(app, "console", cli_args(argc, argv));
  if (a.socket.empty()) a.socket = default_socket();
  return a;
}

}  // namespace corral::cli
