#include <catch2/catch.hpp>

#include <string>

#include "proto/proto.hpp"

using namespace corral::proto;

namespace {
// Packs an arbitrary envelope by hand (to forge other versions / shapes).
template <class Body>
std::string forge(std::string_view magic, std::uint64_t version, std::string_view type,
                  const Body& body) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(magic);
  pk.pack(version);
  pk.pack(type);
  pk.pack(body);
  return std::string(buf.data(), buf.size());
}

// A version-1 submitter's spec, before -pe existed.
struct OldSpec {
  std::string name;
  int ncpus = 0;
  CORRAL_MSGPACK_MAP(name, ncpus)
};
struct OldSubmit {
  OldSpec spec;
  CORRAL_MSGPACK_MAP(spec)
};
// A newer peer's stat request with a key this reader does not know.
struct FutureStatReq {
  int id = 0;
  std::string from_the_future;
  CORRAL_MSGPACK_MAP(id, from_the_future)
};
}  // namespace

TEST_CASE("submit request round-trips with every field", "[proto]") {
  SubmitReq r;
  r.spec.name = "sim";
  r.spec.queue = "express";
  r.spec.project = "a12";
  r.spec.walltime = 3723;
  r.spec.ncpus = 4;
  r.spec.mem_mb = 4096;
  r.spec.jobfs_mb = 1024;
  r.spec.reserve = true;
  r.spec.script = "#!/bin/sh\necho hi\n";
  r.spec.script_name = "job.sh";
  r.spec.stdout_path = "/tmp/o";
  r.spec.stderr_path = "/tmp/e";
  r.spec.cwd = "/home/u";
  r.spec.env = {"A=1", "PATH=/bin"};
  Message m = decode(encode(r));
  REQUIRE(std::holds_alternative<SubmitReq>(m));
  const JobSpec& s = std::get<SubmitReq>(m).spec;
  CHECK(s.name == "sim");
  CHECK(s.queue == "express");
  CHECK(s.project == "a12");
  CHECK(s.walltime == 3723);
  CHECK(s.ncpus == 4);
  CHECK(s.mem_mb == 4096);
  CHECK(s.jobfs_mb == 1024);
  CHECK(s.reserve);
  CHECK(s.script == "#!/bin/sh\necho hi\n");
  CHECK(s.script_name == "job.sh");
  CHECK(s.stdout_path == "/tmp/o");
  CHECK(s.stderr_path == "/tmp/e");
  CHECK(s.cwd == "/home/u");
  CHECK(s.env == std::vector<std::string>{"A=1", "PATH=/bin"});
  CHECK(type_name(m) == "submit_req");
}

TEST_CASE("replies and events round-trip", "[proto]") {
  JobInfo j;
  j.id = 42;
  j.state = "ended";
  j.exit_code = 3;
  j.end_reason = "exited";
  j.cores = {0, 1};
  j.submit_time = 1.5;
  StatRep st;
  st.jobs = {j, j};
  st.jobs[1].id = 43;
  Message m = decode(encode(st));
  REQUIRE(std::holds_alternative<StatRep>(m));
  const auto& jobs = std::get<StatRep>(m).jobs;
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].id == 42);
  CHECK(jobs[1].id == 43);
  CHECK(jobs[0].exit_code == 3);
  CHECK(jobs[0].cores == std::vector<int>{0, 1});
  CHECK(jobs[0].submit_time == 1.5);

  Event e;
  e.seq = 7;
  e.kind = "ended";
  e.job = 42;
  e.reason = "walltime";
  e.exit_code = 137;
  Message me = decode(encode(e));
  REQUIRE(std::holds_alternative<Event>(me));
  CHECK(std::get<Event>(me).seq == 7);
  CHECK(std::get<Event>(me).reason == "walltime");
  CHECK(std::get<Event>(me).exit_code == 137);

  NodeRep nr;
  nr.node.node = "n1";
  nr.node.running = {j};
  Message mn = decode(encode(nr));
  REQUIRE(std::holds_alternative<NodeRep>(mn));
  CHECK(std::get<NodeRep>(mn).node.running.at(0).id == 42);

  ErrorRep er{"permission", "job 5 belongs to alice"};
  Message mer = decode(encode(er));
  REQUIRE(std::holds_alternative<ErrorRep>(mer));
  CHECK(std::get<ErrorRep>(mer).code == "permission");

  for (Message x : {Message{StatReq{9}}, Message{CancelReq{9}}, Message{WaitReq{9}},
                    Message{NodeReq{}}, Message{SubmitRep{9}}, Message{CancelRep{9, "ended"}},
                    Message{WaitRep{j}}}) {
    Message y = decode(encode(x));
    CHECK(y.index() == x.index());
  }
}

TEST_CASE("a missing field keeps its default (older peer)", "[proto]") {
  std::map<std::string, std::uint64_t> body{{"id", 5}};
  Message m = decode(forge(kMagic, kVersion, "wait_req", body));
  CHECK(std::get<WaitReq>(m).id == 5);
  std::map<std::string, int> empty;
  Message s = decode(forge(kMagic, kVersion, "submit_req", std::map<std::string, JobSpec>{
                                                                {"spec", JobSpec{}}}));
  CHECK(std::get<SubmitReq>(s).spec.ncpus == 1);
  Message n = decode(forge(kMagic, kVersion, "node_req", empty));
  CHECK(std::get<NodeReq>(n).recent == 20);
  // An exec request of a caller that sends no stdin: /dev/null, as before `input` existed.
  std::map<std::string, std::string> exec{{"node", "n2"}, {"command", "cat"}};
  Message x = decode(forge(kMagic, kVersion, "exec_req", exec));
  CHECK_FALSE(std::get<ExecReq>(x).input);
}

TEST_CASE("corral exec's stdin round-trips, its end too", "[proto]") {
  ExecReq r{12, "n2", "cat", true};
  CHECK(std::get<ExecReq>(decode(encode(r))).input);
  ExecIn in{std::string("x\0y\n", 4), false};
  Message m = decode(encode(in));
  CHECK(type_name(m) == "exec_in");
  CHECK(std::get<ExecIn>(m).data == std::string("x\0y\n", 4));
  CHECK_FALSE(std::get<ExecIn>(m).eof);
  CHECK(std::get<ExecIn>(decode(encode(ExecIn{"", true}))).eof);
}

TEST_CASE("a wrong protocol version is refused with a clear error", "[proto]") {
  std::string bytes = forge(kMagic, kVersion + 1, "stat_req", StatReq{});
  CHECK_THROWS_WITH(decode(bytes), Catch::Contains("protocol version 2 not supported"));
  std::string zero = forge(kMagic, 0, "stat_req", StatReq{});
  CHECK_THROWS_AS(decode(zero), ProtoError);
}

TEST_CASE("garbage bytes are refused, never crash", "[proto]") {
  CHECK_THROWS_WITH(decode(""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(decode("hello world"), Catch::Contains("not a Corral message"));
  CHECK_THROWS_AS(decode(std::string("\xc1", 1)), ProtoError);
  // An array header claiming 4 billion elements must not allocate them.
  CHECK_THROWS_AS(decode(std::string("\xdd\xff\xff\xff\xff\x01", 6)), ProtoError);
  CHECK_THROWS_AS(decode(std::string("\xdf\xff\xff\xff\xff", 5)), ProtoError);
  // Wrong magic, unknown type, body of the wrong shape, trailing bytes.
  CHECK_THROWS_WITH(decode(forge("other", kVersion, "stat_req", StatReq{})),
                    Catch::Contains("bad magic"));
  CHECK_THROWS_WITH(decode(forge(kMagic, kVersion, "launch_missiles", StatReq{})),
                    Catch::Contains("unknown message type"));
  CHECK_THROWS_WITH(decode(forge(kMagic, kVersion, "stat_req", 12)),
                    Catch::Contains("expected a map"));
  std::map<std::string, std::string> wrong{{"id", "seven"}};
  CHECK_THROWS_WITH(decode(forge(kMagic, kVersion, "stat_req", wrong)),
                    Catch::Contains("wrong type"));
  std::map<std::string, int> negative{{"id", -3}};
  CHECK_THROWS_AS(decode(forge(kMagic, kVersion, "cancel_req", negative)), ProtoError);
  std::string good = encode(StatReq{1});
  CHECK_THROWS_WITH(decode(good + "x"), Catch::Contains("trailing"));
  // Every truncation of a valid message is refused.
  std::string big = encode(SubmitReq{});
  for (std::size_t n = 0; n < big.size(); ++n) CHECK_THROWS_AS(decode(big.substr(0, n)), ProtoError);
  // Random bytes: either a clean ProtoError or (rarely) a valid message.
  std::uint32_t x = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string junk;
    for (int k = 0; k < 1 + i % 40; ++k) {
      x = x * 1664525u + 1013904223u;
      junk.push_back(static_cast<char>(x >> 24));
    }
    try {
      (void)decode(junk);
    } catch (const ProtoError&) {
    }
  }
}

TEST_CASE("frames split and join across reads", "[proto]") {
  std::string a = encode(StatReq{1}), b = encode(CancelReq{2});
  std::string stream = frame(a) + frame(b);
  FrameReader r;
  std::vector<std::string> got;
  for (char c : stream) {
    r.feed(&c, 1);
    std::string f;
    while (r.next(f)) got.push_back(f);
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0] == a);
  CHECK(got[1] == b);
  FrameReader bad;
  std::string huge("\x7f\xff\xff\xff", 4);
  bad.feed(huge.data(), huge.size());
  std::string f;
  CHECK_THROWS_WITH(bad.next(f), Catch::Contains("exceeds"));
}

TEST_CASE("slot ranges and control requests round-trip; older peers still decode", "[proto]") {
  SubmitReq r;
  r.spec.pe = "smp";
  r.spec.slots_min = 2;
  r.spec.slots_max = kSlotsUnbounded;
  Message m = decode(encode(r));
  const JobSpec& s = std::get<SubmitReq>(m).spec;
  CHECK(s.pe == "smp");
  CHECK(s.slots_min == 2);
  CHECK(s.slots_max == kSlotsUnbounded);

  // A version-1 submitter that never heard of -pe: no range.
  {
    Message o = decode(forge(kMagic, kVersion, "submit_req", OldSubmit{{"a", 3}}));
    const JobSpec& os = std::get<SubmitReq>(o).spec;
    CHECK(os.ncpus == 3);
    CHECK(os.name == "a");
    CHECK(os.pe.empty());
    CHECK(os.slots_min == 0);
    CHECK(os.slots_max == 0);
  }
  // A reader that does not know a key (a newer peer's field) ignores it.
  {
    Message n = decode(forge(kMagic, kVersion, "stat_req", FutureStatReq{4, "x"}));
    CHECK(std::get<StatReq>(n).id == 4);
  }

  JobInfo j;
  j.pe = "mpi";
  j.slots_min = 1;
  j.slots_max = 4;
  j.slots = 2;
  j.suspended_seconds = 2.5;
  Message w = decode(encode(WaitRep{j}));
  const JobInfo& wj = std::get<WaitRep>(w).job;
  CHECK(wj.pe == "mpi");
  CHECK(wj.slots == 2);
  CHECK(wj.slots_max == 4);
  CHECK(wj.suspended_seconds == 2.5);

  Message c = decode(encode(ControlReq{7, "suspend"}));
  REQUIRE(std::holds_alternative<ControlReq>(c));
  CHECK(std::get<ControlReq>(c).id == 7);
  CHECK(std::get<ControlReq>(c).action == "suspend");
  CHECK(type_name(c) == "control_req");
  Message cr = decode(encode(ControlRep{7, "suspended", "suspended"}));
  REQUIRE(std::holds_alternative<ControlRep>(cr));
  CHECK(std::get<ControlRep>(cr).state == "suspended");
  CHECK(type_name(cr) == "control_rep");
}
