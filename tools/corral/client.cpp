#include "tools/corral/client.hpp"
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
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace corral::cli {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 12 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

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

std::int64_t parse_walltime(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string p;
  while (std::getline(ss, p, ':')) parts.push_back(p);
  if (!text.empty() && text.back() == ':') parts.push_back("");
  if (parts.empty() || parts.size() > 3)
    throw UsageError("invalid walltime '" + text + "' (use HH:MM:SS or seconds)");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!all_digits(parts[i]))
      throw UsageError("invalid walltime '" + text + "' (use HH:MM:SS or seconds)");
    std::int64_t v = std::stoll(parts[i]);
    if (i > 0 && v >= 60)
      throw UsageError("invalid walltime '" + text + "' (minutes and seconds must be below 60)");
    total = total * 60 + v;
  }
  if (total <= 0) throw UsageError("walltime must be positive, got '" + text + "'");
  return total;
}

std::int64_t parse_size_mb(const std::string& text) {
  std::string t = lower(text);
  std::size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  std::string digits = t.substr(0, i), unit = t.substr(i);
  if (!all_digits(digits))
    throw UsageError("unparsable size '" + text + "' (use e.g. 512mb, 4gb)");
  double v = static_cast<double>(std::stoll(digits));
  double mb;
  if (unit.empty() || unit == "b") mb = v / (1024.0 * 1024.0);
  else if (unit == "kb" || unit == "k") mb = v / 1024.0;
  else if (unit == "mb" || unit == "m") mb = v;
  else if (unit == "gb" || unit == "g") mb = v * 1024.0;
  else if (unit == "tb" || unit == "t") mb = v * 1024.0 * 1024.0;
  else throw UsageError("unparsable size '" + text + "' (unknown unit '" + unit + "'; use b, kb, mb, gb, tb)");
  if (v <= 0) throw UsageError("size must be positive, got '" + text + "'");
  return static_cast<std::int64_t>(std::ceil(mb));
}

void apply_resources(const std::string& list, proto::JobSpec& spec) {
  if (list.empty()) throw UsageError("-l needs a resource list, e.g. -l walltime=1:00:00,ncpus=2");
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw UsageError("resource '" + item + "' has no value (expected name=value)");
    std::string key = lower(item.substr(0, eq)), val = item.substr(eq + 1);
    if (val.empty()) throw UsageError("resource '" + key + "' has an empty value");
    if (key == "walltime") spec.walltime = parse_walltime(val);
    else if (key == "ncpus") {
      if (!all_digits(val) || std::stoll(val) < 1 || std::stoll(val) > proto::kMaxCpus)
        throw UsageError("invalid ncpus '" + val + "' (a positive integer)");
      spec.ncpus = static_cast<std::int32_t>(std::stoll(val));
    } else if (key == "mem" || key == "vmem") spec.mem_mb = parse_size_mb(val);
    else if (key == "jobfs") spec.jobfs_mb = parse_size_mb(val);
    else throw UsageError("unknown resource '" + key + "' (known: walltime, ncpus, mem, jobfs)");
  }
  if (!list.empty() && list.back() == ',') throw UsageError("trailing ',' in -l " + list);
}

SlotRange parse_slot_range(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return UsageError("invalid -pe slot range '" + text + "' (" + why +
                      "; use n-m, n, -m or n-, e.g. 2-8)");
  };
  if (text.empty()) throw bad("empty");
  if (text.find(',') != std::string::npos) throw bad("range lists are not supported, give one range");
  auto number = [&](const std::string& t) -> std::int32_t {
    if (!all_digits(t)) throw bad("'" + t + "' is not a positive integer");
    long long v = std::stoll(t);
    if (v == 0) throw bad("slot counts start at 1");
    if (v > proto::kMaxCpus) throw bad("'" + t + "' is too large");
    return static_cast<std::int32_t>(v);
  };
  SlotRange r;
  std::size_t dash = text.find('-');
  if (dash == std::string::npos) {
    r.min = r.max = number(text);  // "m" = m-m
  } else {
    if (text.find('-', dash + 1) != std::string::npos) throw bad("more than one '-'");
    std::string lo = text.substr(0, dash), hi = text.substr(dash + 1);
    if (lo.empty() && hi.empty()) throw bad("no bound given");
    r.min = lo.empty() ? 1 : number(lo);                          // "-m" = 1-m
    r.max = hi.empty() ? proto::kSlotsUnbounded : number(hi);     // "n-" = n-infinity
    if (r.max < r.min)
      throw bad("the maximum " + hi + " is below the minimum " + lo);
  }
  return r;
}

void apply_pe(const std::string& name, const std::string& range, proto::JobSpec& spec) {
  if (name.empty() || name.size() > 64)
    throw UsageError("-pe needs a parallel environment name (1-64 characters) and a slot range, e.g. -pe smp 2-8");
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '*'))
      throw UsageError("invalid parallel environment name '" + name +
                       "' (letters, digits, _ - . * only)");
  SlotRange r = parse_slot_range(range);
  spec.pe = name;
  spec.slots_min = r.min;
  spec.slots_max = r.max;
  spec.ncpus = r.min;
}

std::uint64_t parse_job_id(const std::string& s) {
  std::string t = s;
  std::size_t dot = t.find('.');  // accept "42.host" as PBS prints
  if (dot != std::string::npos) t.resize(dot);
  bool ok = !t.empty() && t.size() < 19;
  for (char ch : t) ok = ok && ch >= '0' && ch <= '9';
  if (!ok || std::stoull(t) == 0) throw UsageError("invalid job id '" + s + "'");
  return std::stoull(t);
}

Common parse_common(const char* cmd, int argc, char** argv, bool json_ok, const char* usage) {
  Common c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      std::exit(0);
    } else if (a == "--socket") {
      if (i + 1 >= argc) throw UsageError("--socket needs a path");
      c.socket = argv[++i];
    } else if (a.rfind("--socket=", 0) == 0) {
      c.socket = a.substr(9);
    } else if (json_ok && a == "--json") {
      c.json = true;
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError(std::string("unknown option '") + a + "' (see corral " + cmd + " --help)");
    } else {
      c.args.push_back(a);
    }
  }
  if (c.socket.empty()) c.socket = default_socket();
  return c;
}

ControlArgs parse_control(int argc, char** argv) {
  ControlArgs c;
  c.action = argc > 0 ? argv[0] : "";
  Common common = parse_common(c.action.c_str(), argc, argv, false, "");
  for (const auto& a : common.args) c.ids.push_back(parse_job_id(a));
  if (c.ids.empty()) throw UsageError("missing job id");
  c.socket = common.socket;
  return c;
}

SubmitArgs parse_submit(int argc, char** argv) {
  SubmitArgs a;
  proto::JobSpec& s = a.spec;
  std::string script_path, wrap;
  bool have_wrap = false;
  // -pe and -l ncpus= both name the cpu count: one of them only.
  bool have_pe = false, have_ncpus = false;
  for (int i = 1; i < argc; ++i) {
    std::string o = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (o.size() > flag.size()) return o.substr(flag.size() + (o[flag.size()] == '=' ? 1 : 0));
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      return argv[++i];
    };
    auto is = [&](const std::string& flag, bool attached_ok) {
      return o == flag || (attached_ok && o.rfind(flag, 0) == 0 && o.size() > flag.size()) ||
             o.rfind(flag + "=", 0) == 0;
    };
    if (is("--socket", false)) a.socket = value("--socket");
    else if (is("--wrap", false)) { wrap = value("--wrap"); have_wrap = true; }
    else if (o.rfind("--", 0) == 0 && o != "--") throw UsageError("unknown option '" + o + "'");
    else if (o == "-pe") {
      if (i + 2 >= argc) throw UsageError("-pe needs a parallel environment name and a slot range, e.g. -pe smp 2-8");
      if (have_pe) throw UsageError("-pe given twice");
      std::string name = argv[i + 1], range = argv[i + 2];
      if (name.rfind("-", 0) == 0 || range.rfind("--", 0) == 0)
        throw UsageError("-pe needs a parallel environment name and a slot range, e.g. -pe smp 2-8 (got '-pe " +
                         name + " " + range + "')");
      i += 2;
      apply_pe(name, range, s);
      have_pe = true;
    } else if (is("-l", true)) {
      std::string list = value("-l");
      apply_resources(list, s);
      std::stringstream ss(list);
      for (std::string item; std::getline(ss, item, ',');)
        have_ncpus |= lower(item.substr(0, item.find('='))) == "ncpus";
    }
    else if (is("-q", true)) s.queue = value("-q");
    else if (is("-P", true)) s.project = value("-P");
    else if (is("-N", true)) {
      s.name = value("-N");
      if (s.name.empty()) throw UsageError("-N: the job name is empty");
    }
    else if (is("-o", true)) s.stdout_path = value("-o");
    else if (is("-e", true)) s.stderr_path = value("-e");
    else if (is("-R", true)) {
      std::string v = lower(value("-R"));
      if (v == "y" || v == "yes") s.reserve = true;
      else if (v == "n" || v == "no") s.reserve = false;
      else throw UsageError("-R takes y or n, got '" + v + "'");
    } else if (o == "-") {
      if (!script_path.empty()) throw UsageError("more than one script given");
      script_path = "-";
    } else if (o.size() > 1 && o[0] == '-') throw UsageError("unknown option '" + o + "'");
    else {
      if (!script_path.empty())
        throw UsageError("more than one script given ('" + script_path + "' and '" + o + "')");
      script_path = o;
    }
  }
  if (have_pe && have_ncpus)
    throw UsageError("give either -l ncpus=N or -pe NAME RANGE, not both (the slot range is the cpu count)");
  if (have_wrap && !script_path.empty()) throw UsageError("give a script or --wrap, not both");
  if (have_wrap) {
    if (wrap.empty()) throw UsageError("--wrap needs a command");
    s.script = "#!/bin/sh\n" + wrap + "\n";
    s.script_name = "--wrap";
    if (s.name.empty()) s.name = "wrap";
  } else {
    if (script_path.empty()) throw UsageError("missing job script (give a file, '-' for stdin, or --wrap 'command')");
    std::string text;
    if (script_path == "-") {
      std::ostringstream ss;
      ss << std::cin.rdbuf();
      text = ss.str();
    } else {
      struct stat st{};
      if (::stat(script_path.c_str(), &st) != 0)
        throw UsageError("cannot read script '" + script_path + "': " + std::strerror(errno));
      if (!S_ISREG(st.st_mode)) throw UsageError("script '" + script_path + "' is not a regular file");
      std::ifstream in(script_path, std::ios::binary);
      if (!in) throw UsageError("cannot read script '" + script_path + "': " + std::strerror(errno));
      std::ostringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    if (text.empty()) throw UsageError("script '" + script_path + "' is empty");
    if (text.size() > proto::kMaxFrame / 2) throw UsageError("script '" + script_path + "' is too large");
    s.script = text;
    s.script_name = script_path;
    if (s.name.empty()) {
      std::string base = script_path == "-" ? "STDIN" : script_path.substr(script_path.rfind('/') + 1);
      s.name = base.empty() ? "job" : base;
    }
  }
  if (std::string why = proto::check_job_name(s.name); !why.empty())
    throw UsageError(why + (s.name.empty() ? "" : " (-N NAME chooses another)"));
  if (a.socket.empty()) a.socket = default_socket();
  return a;
}

void finish_submit(proto::JobSpec& spec, const std::string& cwd, char** env) {
  spec.cwd = cwd;
  for (char** e = env; e && *e; ++e) spec.env.emplace_back(*e);
  mode_t mask = ::umask(0);  // reading it needs setting it
  ::umask(mask);
  spec.umask = static_cast<std::int32_t>(mask);
  if (std::string why = proto::check_spec(spec); !why.empty()) throw UsageError(why);
}

std::string default_socket() {
  const char* e = std::getenv("CORRAL_SOCKET");
  return e && *e ? e : "/run/corral/corrald.sock";
}

proto::Message request(const std::string& path, const proto::Message& req) {
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

std::string to_json(const proto::JobInfo& j) { return job_json(j).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string to_json(const proto::NodeStatus& n) {
  Json o;
  o["node"] = n.node;
  o["mode"] = n.mode;
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
  return o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace corral::cli
