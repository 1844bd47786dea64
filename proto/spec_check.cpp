#include "proto/spec_check.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace corral::proto {

namespace {

bool has_control(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

std::string check_label(const char* what, std::string_view v) {
  if (v.size() > kMaxLabel)
    return std::string(what) + " is longer than " + std::to_string(kMaxLabel) + " bytes";
  if (has_control(v)) return std::string(what) + " '" + printable(v) + "' holds control characters";
  return "";
}

std::string check_path(const char* what, std::string_view v) {
  if (v.size() > kMaxPath) return std::string(what) + " is longer than " + std::to_string(kMaxPath) + " bytes";
  if (v.find('\0') != std::string_view::npos) return std::string(what) + " holds a NUL byte";
  if (v.find('\n') != std::string_view::npos) return std::string(what) + " '" + printable(v) + "' holds a newline";
  return "";
}

std::string check_size(const char* what, std::int64_t mb) {
  if (mb < 0) return std::string(what) + " must not be negative";
  if (mb > kMaxSizeMb) return std::string(what) + "=" + std::to_string(mb) + "mb is beyond any node (at most " +
                              std::to_string(kMaxSizeMb) + "mb)";
  return "";
}

std::string check_slots(const JobSpec& s) {
  if (s.pe.empty() && s.slots_min == 0 && s.slots_max == 0) return "";
  if (s.pe.empty()) return "a slot range needs a parallel environment name (-pe NAME RANGE)";
  for (unsigned char c : s.pe)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '*'))
      return "invalid parallel environment name '" + printable(s.pe) + "' (letters, digits, _ - . * only)";
  if (s.pe.size() > kMaxLabel) return "the parallel environment name is longer than 64 bytes";
  if (s.slots_min < 1) return "-pe " + s.pe + ": the slot range must start at 1 or more";
  if (s.slots_max < s.slots_min)
    return "-pe " + s.pe + ": the slot range " + std::to_string(s.slots_min) + "-" + std::to_string(s.slots_max) +
           " is empty (maximum below minimum)";
  if (s.slots_min > kMaxCpus || (s.slots_max > kMaxCpus && s.slots_max != kSlotsUnbounded))
    return "-pe " + s.pe + ": slot counts are at most " + std::to_string(kMaxCpus);
  if (s.ncpus != 1 && s.ncpus != s.slots_min) return "give either ncpus or a -pe slot range, not both";
  return "";
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string check_job_name(std::string_view name) {
  if (name.size() > kMaxJobName)
    return "the job name is " + std::to_string(name.size()) + " bytes long; at most " +
           std::to_string(kMaxJobName) + " fit in its output file names";
  if (name.find('/') != std::string_view::npos)
    return "the job name '" + printable(name) + "' holds a '/' (it names the output files)";
  if (has_control(name)) return "the job name '" + printable(name) + "' holds control characters (a newline?)";
  if (name == "." || name == "..") return "the job name cannot be '" + std::string(name) + "'";
  return "";
}

std::string check_states(std::string_view states) {
  std::string_view rest = states;
  while (!states.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view one = rest.substr(0, comma);
    if (std::find(std::begin(state::kAll), std::end(state::kAll), one) == std::end(state::kAll))
      return "unknown state '" + printable(one) + "' (pending, running, suspended, ended; several: pending,running)";
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return "";
}

bool state_listed(std::string_view states, std::string_view state) {
  if (states.empty()) return true;
  for (std::string_view rest = states;;) {
    const std::size_t comma = rest.find(',');
    if (rest.substr(0, comma) == state) return true;
    if (comma == std::string_view::npos) return false;
    rest.remove_prefix(comma + 1);
  }
}

static std::string check_dependencies(const JobSpec& s) {
  if (s.depend.size() > kMaxDepends) return "more than " + std::to_string(kMaxDepends) + " dependencies";
  for (const Dependency& d : s.depend) {
    if (std::find(std::begin(kDependTypes), std::end(kDependTypes), d.type) == std::end(kDependTypes))
      return "unknown dependency type '" + printable(d.type) + "' (afterok, afterany or afternotok)";
    if (d.job == 0) return "a dependency names job 0";
  }
  return "";
}

std::string check_task_index(std::uint64_t id, const ArraySpec& a, std::int64_t index) {
  if (a.on() && index >= a.first && index <= a.last && (index - a.first) % a.step == 0) return "";
  const std::string n = std::to_string(id);
  return n + "[" + std::to_string(index) + "]: array " + n + " has no task " + std::to_string(index) + " (its tasks: " +
         std::to_string(a.first) + "-" + std::to_string(a.last) + (a.step > 1 ? ":" + std::to_string(a.step) : "") + ")";
}

static std::string check_array(const JobSpec& s) {
  const ArraySpec& a = s.array;
  if (a == ArraySpec{}) return "";
  if (a.step < 1) return "job array: the step must be at least 1";
  if (a.first < 0 || a.last > kMaxArrayIndex) return "job array: indices run from 0 to " + std::to_string(kMaxArrayIndex);
  if (a.last < a.first) return "job array: the range " + std::to_string(a.first) + "-" + std::to_string(a.last) + " is empty";
  if (a.tasks() > kMaxArrayTasks)
    return "job array of " + std::to_string(a.tasks()) + " tasks is beyond the limit of " + std::to_string(kMaxArrayTasks);
  if (a.max_running < 0) return "job array: the limit of running tasks must not be negative";
  if (s.immediate) return "-now y and a job array cannot go together";
  return "";
}

std::string check_spec(const JobSpec& s) {
  std::string why = check_job_name(s.name);
  if (why.empty()) why = check_label("the queue name", s.queue);
  if (why.empty()) why = check_label("the project name", s.project);
  if (why.empty()) why = check_label("the flow step", s.flow_step);
  if (!why.empty()) return why;
  if (!s.flow_step.empty() && s.project.empty()) return "a flow step needs a project (-P PROJECT:STEP)";
  if (!s.preempt.empty() && s.preempt != "requeue" && s.preempt != "suspend")
    return "--preempt: expected requeue or suspend, got '" + printable(s.preempt) + "'";
  if (s.walltime < 0) return "walltime must not be negative";
  if (s.walltime > kMaxWalltime)
    return "walltime of " + std::to_string(s.walltime) + " s is beyond the limit of " +
           std::to_string(kMaxWalltime) + " s (ten years)";
  if (s.ncpus < 1) return "ncpus must be at least 1";
  if (s.ncpus > kMaxCpus) return "ncpus=" + std::to_string(s.ncpus) + " is beyond the limit of " + std::to_string(kMaxCpus);
  if (why = check_size("mem", s.mem_mb); !why.empty()) return why;
  if (why = check_size("h_vmem", s.mem_per_slot_mb); !why.empty()) return why;
  if (why = check_size("jobfs", s.jobfs_mb); !why.empty()) return why;
  if (why = check_slots(s); !why.empty()) return why;
  if (s.chunk_ncpus < 0 || (s.chunk_ncpus > 0 && (s.ncpus % s.chunk_ncpus != 0 || !s.pe.empty())))
    return "select: ncpus=" + std::to_string(s.ncpus) + " is not a whole number of chunks of " +
           std::to_string(s.chunk_ncpus) + " cpus (and a chunked job takes no -pe range)";
  if (s.script.empty()) return "the job script is empty";
  if (s.script.size() > kMaxFrame / 2) return "the job script is too large (at most " + std::to_string(kMaxFrame / 2) + " bytes)";
  if (why = check_path("the script name", s.script_name); !why.empty()) return why;
  if (s.cwd.empty() || s.cwd[0] != '/') return "the working directory must be an absolute path";
  if (why = check_path("the working directory", s.cwd); !why.empty()) return why;
  if (why = check_path("the stdout path (-o)", s.stdout_path); !why.empty()) return why;
  if (why = check_path("the stderr path (-e)", s.stderr_path); !why.empty()) return why;
  for (const auto& e : s.env)
    if (e.empty() || e[0] == '=' || e.find('=') == std::string::npos || e.find('\0') != std::string::npos)
      return "environment entry '" + printable(e.substr(0, 40)) + "' is not KEY=VALUE";
  if (why = check_dependencies(s); !why.empty()) return why;
  if (why = check_array(s); !why.empty()) return why;
  if (s.umask != kUmaskUnset && (s.umask < 0 || s.umask > 0777))
    return "umask " + std::to_string(s.umask) + " is not a file mode mask (0 to 0777)";
  return "";
}

}  // namespace corral::proto
