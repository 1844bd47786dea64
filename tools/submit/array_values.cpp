#include "tools/submit/array_values.hpp"

#include <algorithm>
#include <cctype>

#include "tools/submit/values.hpp"

namespace corral::cli {
namespace {

// A whole number in [0, max], or UsageError "OPT: WHAT 'x' ...".
std::int64_t whole(const std::string& opt, const char* what, const std::string& t, std::int64_t max) {
  const bool digits = !t.empty() && t.size() <= 10 &&
                      std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits || std::stoll(t) > max)
    throw UsageError(opt + ": " + what + " '" + t + "' is not a whole number from 0 to " + std::to_string(max));
  return std::stoll(t);
}

}  // namespace

void apply_array(proto::JobSpec& spec, const std::string& opt, const std::string& text) {
  const std::string form = " (expected FIRST-LAST[:STEP][%MAX_RUNNING], e.g. 1-100:2%10)";
  std::string range = text;
  proto::ArraySpec a;
  a.max_running = spec.array.max_running;
  if (const std::size_t pct = range.find('%'); pct != std::string::npos) {
    a.max_running = static_cast<std::int32_t>(whole(opt, "the limit of running tasks", range.substr(pct + 1), 1000000));
    if (a.max_running == 0) throw UsageError(opt + ": the limit of running tasks must be at least 1");
    range.resize(pct);
  }
  a.step = 1;
  if (const std::size_t colon = range.find(':'); colon != std::string::npos) {
    a.step = whole(opt, "the step", range.substr(colon + 1), proto::kMaxArrayIndex);
    if (a.step == 0) throw UsageError(opt + ": the step must be at least 1");
    range.resize(colon);
  }
  if (range.empty()) throw UsageError(opt + " needs a range" + form);
  const std::size_t dash = range.find('-');
  if (dash == std::string::npos && range.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(opt + ": '" + text + "' is not a range" + form);
  a.first = whole(opt, "the first index", range.substr(0, dash), proto::kMaxArrayIndex);
  a.last = dash == std::string::npos ? a.first : whole(opt, "the last index", range.substr(dash + 1), proto::kMaxArrayIndex);
  if (a.last < a.first) throw UsageError(opt + ": the range " + range + " is empty (the last index is below the first)");
  if (a.tasks() > proto::kMaxArrayTasks)
    throw UsageError(opt + ": " + std::to_string(a.tasks()) + " tasks is beyond the limit of " +
                     std::to_string(proto::kMaxArrayTasks));
  spec.array = a;
}

void apply_task_limit(proto::JobSpec& spec, const std::string& text) {
  const std::int64_t n = whole("-tc", "the limit of running tasks", text, 1000000);
  if (n == 0) throw UsageError("-tc: the limit of running tasks must be at least 1");
  spec.array.max_running = static_cast<std::int32_t>(n);
}

JobRef parse_job_ref(const std::string& text) {
  JobRef r;
  const std::size_t open = text.find('[');
  if (open == std::string::npos) {
    r.id = parse_job_id(text);
    return r;
  }
  const std::size_t close = text.find(']', open);
  if (close == std::string::npos || (close + 1 < text.size() && text[close + 1] != '.'))
    throw UsageError("invalid job id '" + text + "' (a task is ID[INDEX], e.g. 42[7])");
  r.id = parse_job_id(text.substr(0, open));
  const std::string index = text.substr(open + 1, close - open - 1);
  if (!index.empty()) {
    const bool digits = index.size() <= 10 &&
                        std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits || std::stoll(index) > proto::kMaxArrayIndex)
      throw UsageError("invalid task index in '" + text + "' (a task is ID[INDEX], e.g. 42[7])");
    r.index = std::stoll(index);
  }
  return r;
}

std::string job_ref_text(std::uint64_t id, std::int64_t index) {
  return std::to_string(id) + (index >= 0 ? "[" + std::to_string(index) + "]" : "");
}

}  // namespace corral::cli
