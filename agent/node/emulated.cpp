// The emulated node: parsing its SPEC and the jobs' run-time directive, and the timers that
// stand in for processes (emulated.hpp).
#include "emulated.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include "coordinator/names.hpp"
#include "agent/node/mono_clock.hpp"

namespace corral::node {

namespace {

constexpr int kMaxEmulatedCores = 65536;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

int to_count(const std::string& key, const std::string& v, int max) {
  std::size_t n = 0;
  long long x = -1;
  try {
    x = std::stoll(v, &n);
  } catch (const std::exception&) {
    n = 0;
  }
  if (n != v.size() || v.empty() || !std::isdigit(static_cast<unsigned char>(v[0])) || x < 1 || x > max)
    throw std::invalid_argument(key + ": expected 1 to " + std::to_string(max) + ", got '" + v + "'");
  return static_cast<int>(x);
}

// "250ms", or a duration in seconds (coordinator/names.hpp).
std::int64_t runtime_ms(const std::string& v) {
  if (v.size() > 2 && v.compare(v.size() - 2, 2, "ms") == 0) {
    const std::string digits = v.substr(0, v.size() - 2);
    if (digits.size() <= 12 && digits.find_first_not_of("0123456789") == std::string::npos) return std::stoll(digits);
  } else if (auto s = find_duration(v)) {
    if (*s <= kMaxDuration / 1000) return *s * 1000;
  }
  throw std::invalid_argument("runtime: expected 250ms or a duration (" + std::string(kDurationGrammar) +
                              "), got '" + v + "'");
}

int exit_code(const std::string& v) {
  if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) > 255)
    throw std::invalid_argument("exit: expected 0 to 255, got '" + v + "'");
  return std::stoi(v);
}

}  // namespace

EmulateSpec parse_emulate_spec(const std::string& text) {
  EmulateSpec s;
  std::set<std::string> seen;
  auto fail = [&](const std::string& why) { return std::invalid_argument("emulate '" + text + "': " + why); };
  std::stringstream in(text);
  std::string part;
  bool any = false;
  while (std::getline(in, part, ',')) {
    any = true;
    const std::size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size())
      throw fail("'" + part + "' is not KEY=VALUE (keys: cores, sockets, mem, jobfs)");
    const std::string key = part.substr(0, eq), v = part.substr(eq + 1);
    if (!seen.insert(key).second) throw fail(key + " given twice");
    try {
      if (key == "cores") s.cores = to_count(key, v, kMaxEmulatedCores);
      else if (key == "sockets") s.sockets = to_count(key, v, kMaxEmulatedCores);
      else if (key == "mem") s.mem_mb = parse_size_mb(v);
      else if (key == "jobfs") s.jobfs_mb = parse_size_mb(v);
      else throw std::invalid_argument("unknown key '" + key + "' (keys: cores, sockets, mem, jobfs)");
    } catch (const std::invalid_argument& e) {
      const std::string why = e.what();
      throw fail(why.rfind(key + ":", 0) == 0 || why.rfind("unknown", 0) == 0 ? why : key + ": " + why);
    }
  }
  if (!any || text.back() == ',') throw fail(any ? "trailing ','" : "empty (e.g. cores=64,sockets=2,mem=256G,jobfs=1T)");
  if (s.cores == 0) throw fail("cores is required (e.g. cores=64)");
  if (s.cores % s.sockets != 0)
    throw fail(std::to_string(s.cores) + " cores do not split evenly into " + std::to_string(s.sockets) + " sockets");
  if (s.mem_mb == 0) s.mem_mb = std::int64_t{4096} * s.cores;
  return s;
}

Topology emulated_topology(const EmulateSpec& spec, const std::string& hostname) {
  Topology t = declared(spec.sockets, spec.cores / spec.sockets, spec.mem_mb);
  t.hostname = hostname;
  t.jobfs_mb = spec.jobfs_mb;
  t.source = "emulated";
  return t;
}

std::string parse_emulated_run(const std::string& script, EmulatedRun& out) {
  std::stringstream in(script);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    const std::size_t a = line.find_first_not_of(" \t\r");
    const bool shebang = first && line.rfind("#!", 0) == 0;
    first = false;
    if (a == std::string::npos || shebang) continue;
    if (line[a] != '#') break;  // the first command: directives end
    static const std::string kTag = "#CORRAL_EMULATE";
    if (line.compare(a, kTag.size(), kTag) != 0) continue;
    const std::size_t rest = a + kTag.size();
    if (rest < line.size() && line[rest] != ' ' && line[rest] != '\t' && line[rest] != '\r') continue;
    std::stringstream words(line.substr(rest));
    std::string w;
    while (words >> w) {
      const std::size_t eq = w.find('=');
      const std::string key = w.substr(0, eq), v = eq == std::string::npos ? "" : w.substr(eq + 1);
      try {
        if (key == "runtime" && !v.empty()) out.runtime_ms = runtime_ms(v);
        else if (key == "exit" && !v.empty()) out.exit_code = exit_code(v);
        else return "#CORRAL_EMULATE: unexpected '" + w + "' (expected runtime=DURATION exit=CODE)";
      } catch (const std::invalid_argument& e) {
        return std::string("#CORRAL_EMULATE: ") + e.what();
      }
    }
  }
  return {};
}

// ---- the timers ------------------------------------------------------------------------------

EmulatedNode::EmulatedNode(Topology topo, Clock clock) : topo_(std::move(topo)), clock_(std::move(clock)) {
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd_ < 0) throw std::runtime_error(std::string("emulated node: timerfd: ") + std::strerror(errno));
}

EmulatedNode::~EmulatedNode() { ::close(timer_fd_); }

std::int64_t EmulatedNode::now() const { return clock_ ? clock_() : mono_ms(); }

std::int64_t EmulatedNode::used_ms(const Job& j, std::int64_t t) const {
  return j.done_ms + (j.suspended ? 0 : std::max<std::int64_t>(0, t - j.stretch_from));
}

std::int64_t EmulatedNode::end_at(const Job& j) const {
  if (j.suspended) return kNever;
  std::int64_t total = j.run.runtime_ms;
  // A run time above the walltime ends at the walltime (just past it, as the Launcher sees it).
  if (j.spec.walltime_s > 0 && total > j.spec.walltime_s * 1000) total = j.spec.walltime_s * 1000 + 1;
  return j.stretch_from + std::max<std::int64_t>(0, total - j.done_ms);
}

// The timerfd fires at the nearest end: at once when an end waits, never when no timer runs.
void EmulatedNode::arm(std::int64_t t) {
  std::int64_t next = ended_.empty() ? kNever : t;
  for (const auto& [id, j] : jobs_) next = std::min(next, end_at(j));
  itimerspec its{};
  if (next != kNever) {
    // The injected clock (tests) may not be the monotonic one: arm relative to now.
    const std::int64_t in = std::max<std::int64_t>(0, next - t);
    its.it_value.tv_sec = in / 1000;
    its.it_value.tv_nsec = (in % 1000) * 1000000 + 1;  // never all zero (that disarms)
  }
  ::timerfd_settime(timer_fd_, 0, &its, nullptr);
}

std::string EmulatedNode::start(const LaunchSpec& spec) {
  const std::string id = std::to_string(spec.id);
  if (jobs_.count(spec.id)) return "job " + id + " is already running here";
  if (spec.argv.empty()) return "job " + id + ": no script to run";
  std::set<int> busy;
  for (const auto& [other, j] : jobs_)
    if (!j.suspended) busy.insert(j.spec.cores.begin(), j.spec.cores.end());
  for (int c : spec.cores) {
    if (c < 0 || c >= static_cast<int>(topo_.cores.size()))
      return "job " + id + ": core " + std::to_string(c) + " is not on this node (" +
             std::to_string(topo_.cores.size()) + " cores)";
    if (busy.count(c)) return "job " + id + ": core " + std::to_string(c) + " is held by a running job";
  }
  std::ifstream f(spec.argv.back());
  std::stringstream text;
  text << f.rdbuf();
  if (!f) return "job " + id + ": cannot read its script " + spec.argv.back();
  Job j;
  if (std::string why = parse_emulated_run(text.str(), j.run); !why.empty()) return "job " + id + ": " + why;
  j.spec = spec;
  j.spec.env.clear();  // not needed to emulate; a big mesh holds many jobs
  auto saved = saved_ms_.find(spec.id);
  if (saved != saved_ms_.end()) {
    if (spec.restart) j.done_ms = std::min(saved->second, j.run.runtime_ms);
    saved_ms_.erase(saved);
  }
  const std::int64_t t = now();
  j.stretch_from = t;
  jobs_.emplace(spec.id, std::move(j));
  arm(t);
  return {};
}

std::string EmulatedNode::suspend(std::uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return "no job " + std::to_string(id) + " here";
  Job& j = it->second;
  if (j.suspended) return "job " + std::to_string(id) + " is already suspended";
  const std::int64_t t = now();
  j.done_ms = used_ms(j, t);
  j.suspended = true;
  arm(t);
  return {};
}

std::string EmulatedNode::resume(std::uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return "no job " + std::to_string(id) + " here";
  Job& j = it->second;
  if (!j.suspended) return "job " + std::to_string(id) + " is not suspended";
  const std::int64_t t = now();
  j.suspended = false;
  j.stretch_from = t;
  arm(t);
  return {};
}

std::string EmulatedNode::stop(std::uint64_t id, EndReason why, int exit_code, const std::string& msg) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return "no job " + std::to_string(id) + " here";
  const std::int64_t t = now();
  if (why == EndReason::Checkpointed) saved_ms_[id] = used_ms(it->second, t);
  jobs_.erase(it);
  ended_.push_back(JobEnd{id, why, exit_code, msg});
  arm(t);
  return {};
}

std::string EmulatedNode::cancel(std::uint64_t id) { return stop(id, EndReason::Cancelled, 137, "cancelled"); }

std::string EmulatedNode::requeue(std::uint64_t id) {
  return stop(id, EndReason::Preempted, 137, "preempted: stopped and requeued");
}

// The emulated job writes its checkpoint at once: its run time so far is kept for its restart.
std::string EmulatedNode::checkpoint(std::uint64_t id) {
  return stop(id, EndReason::Checkpointed, 0, "checkpointed (emulated: at once)");
}

std::vector<JobEnd> EmulatedNode::poll(std::int64_t now_ms) {
  std::uint64_t expirations = 0;
  (void)!::read(timer_fd_, &expirations, sizeof expirations);  // drain; nonblocking
  const std::int64_t t = now_ms < 0 ? now() : now_ms;
  std::vector<JobEnd> out;
  out.swap(ended_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const Job& j = it->second;
    if (end_at(j) > t) {
      ++it;
      continue;
    }
    JobEnd e{it->first, EndReason::Completed, j.run.exit_code, ""};
    const std::int64_t used = used_ms(j, t);
    if (j.spec.walltime_s > 0 && j.run.runtime_ms > j.spec.walltime_s * 1000) {
      e.reason = EndReason::Walltime;
      e.exit_code = 137;
      e.message = "killed: walltime " + std::to_string(j.spec.walltime_s) + " s exceeded (ran " +
                  std::to_string(used) + " ms, suspended time not counted)";
    } else if (j.run.exit_code != 0) {
      e.reason = EndReason::Failed;
      e.message = "failed: exit " + std::to_string(j.run.exit_code);
    } else {
      e.message = "completed (exit 0)";
    }
    out.push_back(std::move(e));
    it = jobs_.erase(it);
  }
  arm(t);
  return out;
}

std::optional<JobUsage> EmulatedNode::usage(std::uint64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  const Job& j = it->second;
  JobUsage u;
  u.walltime_used_ms = used_ms(j, now());
  // As if every core it holds were busy the whole time it ran.
  u.cpu_s = static_cast<double>(u.walltime_used_ms) / 1000.0 * static_cast<double>(j.spec.cores.size());
  u.running = !j.suspended;
  u.suspended = j.suspended;
  return u;
}

std::vector<std::uint64_t> EmulatedNode::jobs() const {
  std::vector<std::uint64_t> out;
  for (const auto& [id, j] : jobs_) out.push_back(id);
  return out;
}

std::optional<LaunchSpec> EmulatedNode::spec(std::uint64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.spec;
}

void EmulatedNode::stop_all() {
  std::vector<std::uint64_t> ids = jobs();
  for (std::uint64_t id : ids) cancel(id);
}

}  // namespace corral::node
