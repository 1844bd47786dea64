// Policies side by side on one trace (`corral sim compare --svg FILE`): the
// figures as grouped bars (one group a figure, one bar a policy) and each
// policy's timeline stacked under them on shared scales, as plain SVG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/sim/sim.hpp"

namespace corral::sim {

struct PolicyRun {
  std::string policy;
  SimResult result;  // with record_segments for the timelines
};

struct CompareOptions {
  std::int64_t unix_start = 0;  // epoch seconds of trace second 0 (0: unknown)
  std::string title;            // the trace
  int bins = 400;
};

std::string compare_svg(const std::vector<PolicyRun>& runs, const CompareOptions& o);

}  // namespace corral::sim
