// NCI charging in a mesh. A run is charged in the replicated state as its end (or requeue) is
// applied, once (MeshState), by the rules of a standalone agent's ledger: its whole running
// seconds (coordinator/nci/ledger.hpp charged_seconds) x its cpus x the charge factor its start
// recorded (service_units). The ledger a coordinator's pass and `corral report` read is built
// from those runs, and from the replicated grants, with the same Ledger: the same figures on
// every member, after any failover.
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/nci/ledger.hpp"
#include "coordinator/service/mesh_state.hpp"

namespace corral::service {

// The cpus a run is charged for: its nodes' shares, else the job's request (a range's least).
int run_cpus(const MeshJob& j, const MeshRun& r);
// Monday 00:00 UTC of the ISO week of `t` (epoch seconds).
std::int64_t week_monday(double t);
// Service units a run is charged: its charge once it ended, else what it ran up to `now`.
double run_su(const MeshJob& j, const MeshRun& r, Time now);
// Every run of the job.
double job_su(const MeshJob& j, Time now);
// The units an hour of running costs the job now (0 once it no longer runs).
double job_su_rate(const MeshJob& j);

// The mesh's charge ledger at `now`: its grants (renewed from week 0, MeshData::charge_origin),
// each ended run charged at its end, each running one up to `now`.
Ledger mesh_ledger(const MeshData& d, Time now);

}  // namespace corral::service
