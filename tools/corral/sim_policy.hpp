// What `corral sim --policy NAME` runs, for commands that replay several
// policies the same way (cmd_compare.cpp). Defined in cmd_sim.cpp, beside
// the defaults and the policy names.
#pragma once

#include <string>

#include "coordinator/sim/sim.hpp"

namespace corral::cli {

// The policy `corral sim` runs without --policy.
std::string sim_default_policy();
// `opt` as `corral sim TRACE --policy NAME` sets it with no other option.
// Throws std::invalid_argument naming the known policies for an unknown NAME.
void sim_policy_options(const std::string& name, sim::SimOptions& opt);

}  // namespace corral::cli
