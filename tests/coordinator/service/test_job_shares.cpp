// A plan's placement as the replicated start's shares (coordinator/service/job_shares.hpp), and the
// state machine keeping them per run.
#include <catch2/catch.hpp>

#include "coordinator/service/job_shares.hpp"
#include "coordinator/service/mesh_state.hpp"

using namespace corral;
using namespace corral::service;

TEST_CASE("job shares: each node its slots and its share of the memory, the script's node first",
          "[mesh_state]") {
  const std::vector<std::string> names = {"n1", "n2", "n3"};
  proto::JobSpec spec;
  spec.ncpus = 5;
  spec.mem_mb = 1000;
  Decision d;
  d.placement = {Placement{2, 3, {}, 1}, Placement{0, 2, {}, 1}};
  proto::mesh::JobStarted e;
  REQUIRE(job_shares(d, names, spec, e));
  CHECK(e.nodes == std::vector<std::string>{"n3", "n1"});
  CHECK(e.slots == std::vector<std::int32_t>{3, 2});
  CHECK(e.mem_mb == std::vector<std::int64_t>{600, 400});

  // One node: the whole job, no shares recorded (as before jobs spanned nodes).
  d.placement = {Placement{1, 5, {}, 1}};
  REQUIRE(job_shares(d, names, spec, e));
  CHECK(e.nodes == std::vector<std::string>{"n2"});
  CHECK(e.slots.empty());

  // A node range (count) stands for consecutive nodes.
  d.placement = {Placement{0, 2, {}, 2}};
  spec.ncpus = 4;
  REQUIRE(job_shares(d, names, spec, e));
  CHECK(e.nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(e.slots == std::vector<std::int32_t>{2, 2});

  // select=2:ncpus=2: a chunk split across nodes is not taken; an unknown node neither.
  spec.chunk_ncpus = 2;
  d.placement = {Placement{0, 3, {}, 1}, Placement{1, 1, {}, 1}};
  CHECK_FALSE(job_shares(d, names, spec, e));
  d.placement = {Placement{0, 2, {}, 1}, Placement{7, 2, {}, 1}};
  CHECK_FALSE(job_shares(d, names, spec, e));
}

TEST_CASE("mesh state: a start across nodes keeps each share; bad shares are refused", "[mesh_state]") {
  MeshState s;
  proto::mesh::JobAccepted a;
  a.spec.ncpus = 4;
  REQUIRE(s.apply(a).ok);
  proto::mesh::JobStarted e{1, 1, {"n1", "n2"}, 1, 1, 10.0, false, 0, {2}, {}};
  CHECK(s.apply(e).reason == "a start needs one share per node");
  e = proto::mesh::JobStarted{1, 1, {"n1", "n1"}, 2, 1, 10.0, false, 0, {2, 2}, {}};
  CHECK(s.apply(e).reason == "node n1 named twice in one start");
  e = proto::mesh::JobStarted{1, 1, {"n1", "n2"}, 3, 1, 10.0, false, 0, {3, 1}, {300, 100}};
  REQUIRE(s.apply(e).ok);
  const MeshRun& r = s.job(1)->runs.back();
  CHECK(r.nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(r.slots == std::vector<std::int32_t>{3, 1});
  CHECK(r.mem_mb == std::vector<std::int64_t>{300, 100});
  CHECK(s.jobs_on("n2") == std::vector<std::uint64_t>{1});
  MeshState copy;
  copy.restore(s.snapshot());
  CHECK(copy.job(1)->runs.back().slots == r.slots);
}
