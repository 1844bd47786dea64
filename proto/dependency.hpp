// Whether a job's dependency (-W depend=TYPE:ID, -hold_jid ID) is met, once for a standalone
// node (agent/dependencies.cpp) and the mesh's coordinator (coordinator/service): a job waits
// while the other job has not ended; afterok is met when it completed, afternotok when it ended
// any other way, afterany when it ended at all. A dependency that can never be met (its job is
// unknown, or ended the wrong way) ends the waiting job instead of leaving it pending for ever.
#pragma once

#include <string>

#include "proto/proto.hpp"

namespace corral::proto {

enum class DependVerdict { Waiting, Met, Never };

// `known`: job d.job exists; `ended` and `completed`: how it is now. `why` says why a
// dependency can never be met.
inline DependVerdict judge_dependency(const Dependency& d, bool known, bool ended, bool completed,
                                      const std::string& end_reason, std::string& why) {
  const std::string what = d.type + ":" + std::to_string(d.job);
  if (!known) {
    why = what + " can never be met: job " + std::to_string(d.job) + " is unknown";
    return DependVerdict::Never;
  }
  if (!ended) return DependVerdict::Waiting;
  if (d.type == "afterany" || (d.type == "afterok") == completed) return DependVerdict::Met;
  why = what + " can never be met: job " + std::to_string(d.job) + " ended " + end_reason;
  return DependVerdict::Never;
}

// One dependency as `corral stat` tells why a job waits: "afterok:12 (job 12 is running)";
// `state` empty when the job is not known here.
inline std::string dependency_item(const Dependency& d, const std::string& state) {
  return d.type + ":" + std::to_string(d.job) + (state.empty() ? "" : " (job " + std::to_string(d.job) + " is " + state + ")");
}

}  // namespace corral::proto
