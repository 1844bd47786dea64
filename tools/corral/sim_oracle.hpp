// `corral sim --oracle-starts FILE`: ages each job at the time another run
// (the --starts file of, say, EASY) started it. It knows the future, so no
// scheduler can do it; it measures how far aging alone could go, e.g. how
// close to EASY's worst wait an order can stay that knows EASY's waits.
#pragma once

#include <string>
#include <unordered_map>

#include "coordinator/sim/sim.hpp"

namespace corral::cli {

struct SimOracle {
  std::string file;      // 'id,start' lines as --starts writes them (empty: off)
  double fraction = 1;   // --oracle-fraction: ages at submit + fraction x the reference wait
  Time min_wait = 0;     // --oracle-min-wait: only jobs the reference made wait at least this
};

// The reference starts by trace job id; a start of -1 (never started) is
// left out. Throws std::runtime_error naming the file and line of the first
// bad line or a repeated id.
std::unordered_map<JobId, Time> read_oracle_starts(const std::string& path);

// Chains the aging onto opt.on_arrival (kept, called first).
void use_oracle(sim::SimOptions& opt, const SimOracle& oracle, std::unordered_map<JobId, Time> starts);

}  // namespace corral::cli
