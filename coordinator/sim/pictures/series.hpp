// A replay over time: processors busy and the queue (jobs and requested
// processor-hours), as time-weighted means over equal bins of the whole
// run. Read from the run segments (SimOptions::record_segments).
#pragma once

#include <vector>

#include "coordinator/sim/sim.hpp"

namespace corral::sim {

struct Series {
  Time origin = 0;  // bin 0 starts here (the trace's first submit)
  Time bin = 1;     // seconds a bin
  int procs = 0;    // the machine
  std::vector<double> busy;        // processors running a job (checkpoints included)
  std::vector<double> queued;      // jobs waiting: submitted or requeued, not running
  std::vector<double> queued_ph;   // their procs x requested time, in processor-hours
  Time end() const { return origin + bin * static_cast<Time>(busy.size()); }
};

// At most `bins` bins from the first submit to the last event (at least one second
// each). A job waits from its submit to its first start and from each
// checkpoint or requeue to its next start (a suspended job holds its place:
// not queued); one never started waits to the end.
Series series_of(const SimResult& r, int bins);

}  // namespace corral::sim
