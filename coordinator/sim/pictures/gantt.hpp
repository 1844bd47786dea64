// The Gantt chart of a replay: who ran where and when, as plain SVG.
//
// One row a processor (a host's cores one under another), time to the
// right. Each run segment is drawn on the hosts it was placed on (where they
// are not contiguous, a rectangle on each run of rows); on a host of several
// cores the simulator tracks counts, not core numbers, so the chart gives a
// run the lowest cores free on that host. Dashed outlines are reservations
// (the start a queued job was promised at the last pass before it started,
// held for its requested time, on the hosts it then ran on); marks at a
// segment's end show checkpoints and preemptions. Each job carries a tooltip.
//
// For tests: job rectangles are class "job-run" inside a class "job" group
// with data-job, data-start and data-end (trace seconds); each rectangle
// has data-row (its first row) and data-rows.
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/sim/sim.hpp"

namespace corral::sim {

struct GanttOptions {
  Time from = 0, to = 86400;     // the range drawn, seconds since `origin`
  Time origin = 0;               // the trace's first submit (trace seconds)
  std::int64_t unix_start = 0;   // epoch seconds of trace second 0 (0: unknown)
  int cores_per_node = 1;        // rows a host
  std::string title;             // what was replayed (trace, policy)
};

// Needs a replay with SimOptions::record_segments.
std::string gantt_svg(const SimResult& r, const GanttOptions& g);

}  // namespace corral::sim
