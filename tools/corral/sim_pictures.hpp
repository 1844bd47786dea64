// `corral sim`'s pictures: --gantt FILE.svg over --from .. --to and
// --timeline FILE.svg over the whole trace (coordinator/sim/pictures/).
#pragma once

#include <string>

#include "coordinator/sim/sim.hpp"
#include "coordinator/sim/swf.hpp"

namespace corral::cli {

struct SimPictures {
  std::string gantt, timeline;  // files to write (empty: none)
  Time from = -1, to = -1;      // --from / --to: seconds since the trace's first submit (-1: not given)
  bool wanted() const { return !gantt.empty() || !timeline.empty(); }
};

// What is wrong with the options ("" if nothing): a range without a chart,
// --to not after --from.
std::string picture_usage_error(const SimPictures& p);

// Writes the pictures of a replay made with SimOptions::record_segments;
// `title` names what was replayed. Throws std::runtime_error if a file
// cannot be written.
void write_pictures(const SimPictures& p, const sim::SimResult& r, const sim::SwfTrace& trace,
                    const std::string& title, const std::string& policy, int cores_per_node);

// The file name of a path ("/a/b/KTH.swf" -> "KTH.swf"), for titles.
std::string base_name(const std::string& path);

// Writes text to a file; throws std::runtime_error naming it on failure.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace corral::cli
