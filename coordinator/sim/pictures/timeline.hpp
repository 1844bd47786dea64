// A replay over its whole trace: utilization and the queue (jobs and
// requested processor-hours) as stacked panels over one time axis, as
// plain SVG (`corral sim --timeline FILE.svg`; `corral sim compare --svg`
// stacks one block a policy).
#pragma once

#include <cstdint>
#include <string>

#include "coordinator/sim/pictures/series.hpp"
#include "coordinator/sim/pictures/svg.hpp"

namespace corral::sim {

struct TimelineOptions {
  std::int64_t unix_start = 0;  // epoch seconds of trace second 0 (0: unknown)
  std::string title;            // what was replayed: the trace
  std::string policy;           // named in the title
  int bins = 500;
};

// Needs a replay with SimOptions::record_segments.
std::string timeline_svg(const SimResult& r, const TimelineOptions& t);

// The largest values the queue panels show (shared across blocks so that
// stacked blocks compare).
struct QueueScale {
  double jobs = 1, proc_hours = 1;
};
QueueScale queue_scale(const Series& s);
QueueScale widest(const QueueScale& a, const QueueScale& b);

// Draws the three panels of `s` from pixel (x, y), `w` wide, in `colour`,
// a label over them; time ticks on every panel, labelled under the last if
// `labels`. Returns the height used.
double draw_timeline(svg::Doc& d, const Series& s, double x, double y, double w, const QueueScale& q,
                     const std::string& label, const std::string& colour, bool labels);

}  // namespace corral::sim
