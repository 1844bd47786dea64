// A job across nodes: the plan's placement as each node's share, in the
// replicated start (proto::mesh::JobStarted: nodes, slots, mem_mb).
#pragma once

#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "proto/mesh.hpp"

namespace corral::service {

// Sets e.nodes (the first runs the script) and, when the placement spans
// several nodes, e.slots and e.mem_mb (the job's memory split as the planner
// splits it: each node its share of the slots, rounded up). False when the
// decision cannot be taken as it is: a node index out of range, or a chunk
// (-l select) split across nodes (the job then waits for the next pass).
bool job_shares(const Decision& d, const std::vector<std::string>& names, const proto::JobSpec& spec,
                proto::mesh::JobStarted& e);

}  // namespace corral::service
