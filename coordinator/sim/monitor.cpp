// MONITOR lines of a replay with the trace's job ids (sim.hpp on_monitor).
#include <charconv>
#include <string>
#include <vector>

#include "coordinator/sim/sim.hpp"

namespace corral::sim {

void monitor_trace_ids(std::vector<std::string>& lines, const SwfTrace& trace) {
  for (std::string& l : lines) {
    // "jobid:task:STATE:...": the replay's id is the trace index + 1. The
    // "::::::::" separator (no id) stays as it is.
    const std::size_t colon = l.find(':');
    if (colon == 0 || colon == std::string::npos) continue;
    JobId id = 0;
    auto [end, ec] = std::from_chars(l.data(), l.data() + colon, id);
    if (ec != std::errc() || end != l.data() + colon || id < 1 || id > trace.jobs.size()) continue;
    l.replace(0, colon, std::to_string(trace.jobs[static_cast<std::size_t>(id - 1)].id));
  }
}

}  // namespace corral::sim
