// Lookups in a queue table and small decision helpers shared by the NCI
// parts (private to coordinator/nci).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/nci/nci.hpp"

namespace corral::nci_detail {

inline const std::vector<Queue>& table_of(const std::vector<Queue>& queues, const NciConfig& cfg) {
  return queues.empty() ? cfg.queues : queues;
}

inline const std::string& queue_name(const Job& j, const NciConfig& cfg) {
  return j.queue.empty() ? cfg.default_queue : j.queue;
}

// Runpriority of queue `q` in the table `qs` (0 for a queue it lacks).
inline int runpriority(const std::vector<Queue>& qs, const std::string& q) {
  const Queue* qq = nci_find_queue(qs, q);
  return qq ? qq->priority : 0;
}

// A decision about `job` at `at` (no slots, no placement).
inline Decision decision(Action a, JobId job, Time at, std::string reason) {
  Decision d;
  d.action = a;
  d.job = job;
  d.at = at;
  d.reason = std::move(reason);
  return d;
}

// Share of a whole-job amount carried by k of its n cpus (rounded up, so the
// per-node shares never sum below the whole).
inline std::int64_t share(std::int64_t total, int k, int n) {
  if (total <= 0 || k <= 0 || n <= 0) return 0;
  return (total * k + n - 1) / n;
}

}  // namespace corral::nci_detail
