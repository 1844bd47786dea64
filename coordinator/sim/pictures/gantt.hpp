// The Gantt chart of a replay: who ran where and when, as plain SVG.
#pragma once

#include <string>

#include "coordinator/sim/sim.hpp"

namespace corral::sim {

// An SVG Gantt chart of the segments overlapping [from, to).
std::string gantt_svg(const SimResult& r, Time from, Time to);

}  // namespace corral::sim
