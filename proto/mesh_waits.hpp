// Why pending jobs wait and when they are planned to start, asked of the coordinator on the jobs
// channel (mesh_jobs.hpp) by `corral stat` and `corral console` on any node: the plan is the
// coordinator's last pass, never replicated, so a member asks for it (WaitAsk) and the
// coordinator answers from that pass (WaitAnswer); a member that gets no answer lists its
// jobs without one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/msgpack_map.hpp"

namespace corral::proto::jobs {

struct JobWait {
  std::uint64_t job = 0;
  double planned_start = 0;      // 0: the last pass planned no start
  std::string reason;            // proto::wait
  std::string detail;
  CORRAL_MSGPACK_MAP(job, planned_start, reason, detail)
};

struct WaitAsk {
  std::string mesh;
  std::uint64_t from = 0;        // the asking member (the answer goes there)
  std::uint64_t request = 0;
  std::vector<std::uint64_t> jobs;  // pending jobs
  CORRAL_MSGPACK_MAP(mesh, from, request, jobs)
};

struct WaitAnswer {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t request = 0;     // WaitAsk::request
  std::string status;            // "ok"; "not_leader" (`leader`: the one it knows, 0 none)
  std::uint64_t leader = 0;
  std::vector<JobWait> waits;    // the jobs asked about that the last pass saw pending
  CORRAL_MSGPACK_MAP(mesh, from, request, status, leader, waits)
};

}  // namespace corral::proto::jobs
