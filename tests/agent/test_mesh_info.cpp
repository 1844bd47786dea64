// A replicated job as `corral stat` shows it on any node of a mesh (agent/mesh_jobs.cpp).
#include <catch2/catch.hpp>

#include "agent/daemon.hpp"
#include "coordinator/service/mesh_state.hpp"

using corral::service::MeshJob;
using corral::service::MeshRun;

TEST_CASE("mesh stat: memory per slot (h_vmem) shows as the slots the job holds", "[mesh]") {
  MeshJob j;
  j.id = 7;
  j.state = "pending";
  j.spec.pe = "smp";
  j.spec.slots_min = 2;
  j.spec.slots_max = 4;
  j.spec.mem_per_slot_mb = 1024;
  CHECK(corral::agent::mesh_info(j).mem_mb == 2048);  // the fewest slots it may start with
  MeshRun r;
  r.nodes = {"a", "b"};
  r.slots = {3, 1};
  j.runs.push_back(r);
  j.state = "running";
  CHECK(corral::agent::mesh_info(j).mem_mb == 4096);  // 3 slots on a, 1 on b
  j.spec.mem_per_slot_mb = 0;
  j.spec.mem_mb = 500;
  CHECK(corral::agent::mesh_info(j).mem_mb == 500);  // a job's total, as asked
}
