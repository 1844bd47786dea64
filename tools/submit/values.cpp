#include "tools/submit/values.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

#include "coordinator/names.hpp"
#include "proto/spec_check.hpp"

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

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string p; std::getline(ss, p, sep);) parts.push_back(p);
  if (!text.empty() && text.back() == sep) parts.push_back("");
  return parts;
}

void add_dependency(proto::JobSpec& s, const std::string& type, std::uint64_t id) {
  const proto::Dependency d{type, id};
  if (std::find(s.depend.begin(), s.depend.end(), d) != s.depend.end()) return;
  if (s.depend.size() >= proto::kMaxDepends)
    throw UsageError("more than " + std::to_string(proto::kMaxDepends) + " dependencies");
  s.depend.push_back(d);
}

}  // namespace

std::int64_t parse_walltime(const std::string& text) {
  const std::vector<std::string> parts = split(text, ':');
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
  try {
    return corral::parse_size_mb(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

namespace {

// select=K:ncpus=M[:mem=X] (PBS Pro's chunks): K chunks of M cpus and X memory each, every chunk
// whole on one node. The job asks K * M cpus and K * X memory in all.
void apply_select(const std::string& val, proto::JobSpec& spec) {
  const std::string usage = " (use select=K:ncpus=M[:mem=SIZE], e.g. select=2:ncpus=4)";
  std::vector<std::string> parts = split(val, ':');
  if (!all_digits(parts[0]) || parts[0].size() > 6 || std::stoll(parts[0]) < 1)
    throw UsageError("invalid select '" + val + "': the chunk count must be a positive integer" + usage);
  long long chunks = std::stoll(parts[0]), cpus = 1, mem = 0;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    std::size_t eq = parts[i].find('=');
    std::string key = lower(parts[i].substr(0, eq)), v = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (v.empty()) throw UsageError("invalid select '" + val + "': '" + parts[i] + "' has no value" + usage);
    if (key == "ncpus") {
      if (!all_digits(v) || v.size() > 6 || std::stoll(v) < 1)
        throw UsageError("invalid select '" + val + "': ncpus must be a positive integer" + usage);
      cpus = std::stoll(v);
    } else if (key == "mem") {
      mem = parse_size_mb(v);
    } else {
      throw UsageError("invalid select '" + val + "': unknown chunk resource '" + key + "' (known: ncpus, mem)");
    }
  }
  if (chunks * cpus > proto::kMaxCpus)
    throw UsageError("invalid select '" + val + "': " + std::to_string(chunks * cpus) + " cpus in all is too many");
  spec.ncpus = static_cast<std::int32_t>(chunks * cpus);
  spec.chunk_ncpus = static_cast<std::int32_t>(cpus);
  if (mem > 0) spec.mem_mb = chunks * mem;
}

}  // namespace

bool apply_resources(const std::string& list, proto::JobSpec& spec) {
  if (list.empty()) throw UsageError("-l needs a resource list, e.g. -l walltime=1:00:00,ncpus=2");
  if (list.back() == ',') throw UsageError("trailing ',' in -l " + list);
  bool ncpus = false;
  for (const std::string& item : split(list, ',')) {
    if (lower(item) == "wd") continue;  // NCI: start in the submit directory, as every job does
    std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw UsageError("resource '" + item + "' has no value (expected name=value)");
    std::string key = lower(item.substr(0, eq)), val = item.substr(eq + 1);
    if (val.empty()) throw UsageError("resource '" + key + "' has an empty value");
    if (key == "walltime" || key == "h_rt") spec.walltime = parse_walltime(val);
    else if (key == "ncpus") {
      if (!all_digits(val) || std::stoll(val) < 1 || std::stoll(val) > proto::kMaxCpus)
        throw UsageError("invalid ncpus '" + val + "' (a positive integer)");
      spec.ncpus = static_cast<std::int32_t>(std::stoll(val));
      ncpus = true;
    } else if (key == "select") {
      apply_select(val, spec);
      ncpus = true;
    } else if (key == "mem" || key == "vmem") {
      spec.mem_mb = parse_size_mb(val);
      spec.mem_per_slot_mb = 0;  // the last memory request wins (a command line's over a directive)
    } else if (key == "h_vmem") {  // Grid Engine: per slot, times the slots the job starts with
      spec.mem_per_slot_mb = parse_size_mb(val);
      spec.mem_mb = 0;
    }
    else if (key == "jobfs") spec.jobfs_mb = parse_size_mb(val);
    else throw UsageError("unknown resource '" + key + "' (known: walltime, ncpus, select, mem, vmem, jobfs, h_rt, h_vmem, wd)");
  }
  return ncpus;
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

bool yes_no(const char* opt, const std::string& value) {
  const std::string v = lower(value);
  if (v == "y" || v == "yes") return true;
  if (v == "n" || v == "no") return false;
  throw UsageError(std::string(opt) + " takes y or n, got '" + v + "'");
}

void apply_project(proto::JobSpec& s, const std::string& v) {
  const std::size_t colon = v.find(':');
  s.project = v.substr(0, colon);
  s.flow_step = colon == std::string::npos ? "" : v.substr(colon + 1);
  if (colon != std::string::npos && (s.project.empty() || s.flow_step.empty()))
    throw UsageError("-P takes PROJECT or PROJECT:STEP, got '" + v + "'");
}

std::string preempt_choice(const std::string& what, const std::string& v) {
  try {
    return std::string(name(parse_preempt_mode(v)));
  } catch (const std::invalid_argument& e) {
    throw UsageError(what + ": " + e.what());
  }
}

void apply_join(proto::JobSpec& s, const std::string& value) {
  const std::string v = lower(value);
  if (v == "oe" || v == "y" || v == "yes") s.join = true;
  else if (v == "n" || v == "no") s.join = false;
  else throw UsageError("-j takes oe (or y: stderr into the stdout file) or n, got '" + value + "'");
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

void apply_w(proto::JobSpec& s, const std::string& value) {
  const std::size_t eq = value.find('=');
  const std::string attr = lower(value.substr(0, eq));
  if (attr != "depend")
    throw UsageError("unknown -W attribute '" + attr + "' (Corral knows depend=TYPE:ID[:ID...])");
  const std::string list = eq == std::string::npos ? "" : value.substr(eq + 1);
  const std::string types = "afterok, afterany or afternotok";
  if (list.empty()) throw UsageError("-W depend= needs TYPE:ID[:ID...] (TYPE: " + types + ")");
  for (const std::string& item : split(list, ',')) {
    const std::vector<std::string> parts = split(item, ':');
    const std::string type = lower(parts[0]);
    if (std::find(std::begin(proto::kDependTypes), std::end(proto::kDependTypes), type) == std::end(proto::kDependTypes))
      throw UsageError("-W depend: unknown dependency type '" + parts[0] + "' (" + types + ")");
    if (parts.size() < 2) throw UsageError("-W depend: " + type + " needs at least one job id (" + type + ":ID)");
    for (std::size_t i = 1; i < parts.size(); ++i) add_dependency(s, type, parse_job_id(parts[i]));
  }
}

void apply_hold_jid(proto::JobSpec& s, const std::string& value) {
  if (value.empty()) throw UsageError("-hold_jid needs a job id (or ID,ID...)");
  for (const std::string& id : split(value, ',')) add_dependency(s, "afterany", parse_job_id(id));
}

}  // namespace corral::cli
