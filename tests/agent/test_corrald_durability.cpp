// corrald loses nothing when its state is damaged or its disk fills: a damaged journal stops it
// with a clear error until --recover, which adopts (never kills) running jobs it forgot; a full
// state disk refuses submits clearly and holds pending jobs until there is room; and SIGKILL at
// random points never loses an acknowledged job, reuses an id or kills a running job.
#include <catch2/catch.hpp>

#include <sys/mount.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "agent/journal_format.hpp"
#include "harness.hpp"
#include "harness_proto.hpp"
#include "tests/effort.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::trim;

namespace {

std::string read_bytes(const std::string& path) { return harness::slurp(path); }
void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// Every job `corral stat --json` lists: id -> its JSON object.
std::multimap<std::string, std::string> all_jobs(const Agent& a) {
  auto r = a.cli({"stat", "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  std::multimap<std::string, std::string> out;
  std::size_t p = 0;
  while ((p = r.out.find("{\"id\":", p)) != std::string::npos) {
    std::size_t e = r.out.find("\n", p);
    std::string obj = r.out.substr(p, e == std::string::npos ? std::string::npos : e - p);
    out.emplace(json_field(obj, "id"), obj);
    p += 6;
  }
  return out;
}

// Unmounts (lazily: corrald may still hold files) what the test mounted.
struct Mount {
  std::string at;
  ~Mount() {
    if (!at.empty()) ::umount2(at.c_str(), MNT_DETACH);
  }
};

// Fills the file system of `dir` with one file until it is full.
void fill(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f);
  std::string block(4096, 'x');
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
  }
  std::fclose(f);
}

}  // namespace

TEST_CASE("a damaged journal stops corrald; --recover restores, adopts the forgotten running job",
          "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("damage");
  a.start();
  auto n = a.cli({"node", "--json"});
  std::string cores = json_field(n.out, "slots_total");
  REQUIRE(a.submit({"-l", "ncpus=" + cores + ",walltime=600", "--wrap", "sleep 300"}).rc == 0);
  for (int i = 0; i < 4; ++i) REQUIRE(a.submit({"--wrap", "true"}).rc == 0);
  REQUIRE(harness::wait_state(a, "1", "running") == "running");
  auto server = harness::children_of(a.pid);
  REQUIRE(server.size() == 1);
  auto job_pids = harness::children_of(server[0]);
  REQUIRE(!job_pids.empty());
  a.stop(SIGKILL);

  // Damage every entry of job 1 (running) and of job 3 (pending).
  std::string path = a.dir + "/state/journal";
  std::string data = read_bytes(path);
  for (std::size_t pos = 0; pos < data.size();) {
    corral::agent::journal::Entry e;
    std::size_t len = corral::agent::journal::decode_at(data, pos, e);
    REQUIRE(len > 0);
    if (e.op == "put" && (e.job.id == 1 || e.job.id == 3)) data[pos + len / 2] ^= 0x20;
    pos += len;
  }
  write_bytes(path, data);
  CHECK_THROWS_WITH(a.start(), Catch::Contains("damaged at byte offset") && Catch::Contains(path) &&
                                   Catch::Contains("--recover"));
  CHECK((read_bytes(path) == data));  // left as it was
  for (pid_t p : job_pids) CHECK(harness::alive(p));

  a.extra.push_back("--recover");
  a.start();
  std::string log = a.log();
  INFO(log);
  CHECK(log.find("recover: job 3 could not be restored") != std::string::npos);
  for (pid_t p : job_pids) CHECK(harness::alive(p));  // never killed as a stray
  std::string j1 = stat_json(a, "1");
  CHECK(json_field(j1, "state") == "running");
  CHECK(json_field(j1, "comment").find("adopted") != std::string::npos);
  CHECK(a.cli({"stat", "3"}).rc != 0);
  for (const char* id : {"2", "4", "5"}) CHECK(json_field(stat_json(a, id), "state") == "pending");
  auto s = a.submit({"--wrap", "true"});
  REQUIRE(s.rc == 0);
  CHECK(std::stoull(trim(s.out)) > 5);  // id 3 is never handed out again
  REQUIRE(a.cli({"cancel", "1"}).rc == 0);
  for (const char* id : {"2", "4", "5"}) CHECK(a.cli({"wait", id}).rc == 0);
}

TEST_CASE("a full state disk refuses submits clearly; pending jobs wait for room; restart works",
          "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("diskfull", {"--set", "heartbeat_interval=0.2"});
  std::string state = a.dir + "/state";
  ::mkdir(state.c_str(), 0700);
  Mount m;
  if (::mount("tmpfs", state.c_str(), "tmpfs", 0, "size=2m,mode=0700") != 0) {
    CORRAL_SKIP(std::string("cannot mount a small tmpfs for the state disk: ") + std::strerror(errno));
    return;
  }
  m.at = state;
  a.start();
  harness::Events ev(a);
  std::string cores = json_field(a.cli({"node", "--json"}).out, "slots_total");
  REQUIRE(a.submit({"-l", "ncpus=" + cores + ",walltime=600", "--wrap", "sleep 300"}).rc == 0);
  REQUIRE(harness::wait_state(a, "1", "running") == "running");
  // Job 2's script spans three pages, more than job 1's end frees (its one-page script), so it
  // still cannot be written once job 1 is gone.
  REQUIRE(a.submit({"-N", "two", "--wrap", "echo two #" + std::string(10000, 'p')}).rc == 0);
  fill(state + "/filler");

  std::string big = "true #" + std::string(8000, 'b');
  auto r = a.submit({"--wrap", big});
  INFO(r.err);
  CHECK(r.rc != 0);
  CHECK(r.err.find("state disk full: job not accepted") != std::string::npos);
  CHECK(a.cli({"node"}).rc == 0);  // still serving
  CHECK(all_jobs(a).size() == 2);

  // Job 1 ends: job 2's script cannot be written, so it waits (not launch_failed).
  REQUIRE(a.cli({"cancel", "1"}).rc == 0);
  REQUIRE(harness::wait_state(a, "1", "ended") == "ended");
  // Events come in order: by job 1's end, the refused submit's would have come. None says a job
  // was submitted that does not exist, and none is missing from the numbering.
  REQUIRE(ev.await("ended", 1));
  for (const auto& e : ev.got) {
    INFO(e.kind << " of job " << e.job);
    CHECK((e.job == 0 || e.job == 1 || e.job == 2));
  }
  CHECK(ev.find("submitted", 2));
  for (std::size_t i = 1; i < ev.got.size(); ++i) CHECK(ev.got[i].seq == ev.got[i - 1].seq + 1);
  std::string two;
  for (int t = 0; t < 10000; t += 20) {
    two = stat_json(a, "2");
    if (json_field(two, "comment").find("state disk full") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(json_field(two, "state") == "pending");
  CHECK(json_field(two, "comment").find("state disk full") != std::string::npos);

  // Restart on the full disk: the journal is intact, so corrald comes up.
  a.stop(SIGKILL);
  a.start();
  CHECK(json_field(stat_json(a, "2"), "state") == "pending");
  CHECK(!std::filesystem::exists(state + "/journal.new"));

  ::unlink((state + "/filler").c_str());
  auto w = a.cli({"wait", "2"});
  CHECK(w.rc == 0);
  CHECK(json_field(stat_json(a, "2"), "end_reason") == "completed");
  auto again = a.submit({"--wrap", big});
  INFO(again.err);
  CHECK(again.rc == 0);
  CHECK(a.cli({"wait", trim(again.out)}).rc == 0);
}

TEST_CASE("crash test: SIGKILL at random points loses no acknowledged job, reuses no id, kills no job",
          "[agent]") {
  SKIP_UNLESS_ROOT();
  std::uint32_t seed = std::random_device{}();
  if (const char* s = std::getenv("CORRAL_CRASH_SEED")) seed = static_cast<std::uint32_t>(std::stoul(s));
  // 30 rounds, fewer in the sanitizer build (tests/effort.hpp).
  const int rounds =
      std::getenv("CORRAL_CRASH_ROUNDS") ? std::atoi(std::getenv("CORRAL_CRASH_ROUNDS")) : corral_test::scaled(30, 10);
  std::printf("crash test: seed %u (CORRAL_CRASH_SEED=%u to repeat), %d rounds\n", seed, seed, rounds);
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Agent a("crash");
  std::map<std::string, std::string> acked;  // id -> job name (submission number)
  int submitted = 0;
  for (int round = 0; round < rounds; ++round) {
    a.start();
    // Submits (short jobs that start and end) until a random moment, then SIGKILL mid-way.
    std::atomic<bool> go{true};
    std::vector<std::pair<std::string, std::string>> got;
    int k = std::uniform_int_distribution<int>(1, 6)(rng);
    std::vector<std::string> naps;  // drawn here: one generator, one thread
    for (int i = 0; i < k; ++i) naps.push_back(std::to_string(std::uniform_int_distribution<int>(0, 300)(rng) / 1000.0));
    std::thread submitter([&] {
      for (int i = 0; i < k && go; ++i) {
        std::string name = "s" + std::to_string(submitted + i);
        const std::string& ms = naps[static_cast<std::size_t>(i)];
        auto r = a.submit({"-N", name, "--wrap",
                           "echo x >> " + a.dir + "/work/ran.$CORRAL_JOBID; sleep " + ms});
        if (r.rc == 0) got.emplace_back(trim(r.out), name);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 250)(rng)));
    a.stop(SIGKILL);
    go = false;
    submitter.join();
    submitted += k;
    for (auto& [id, name] : got) {
      INFO("round " << round << ": id " << id);
      CHECK(acked.emplace(id, name).second);  // no id handed out twice
    }
    a.start();
    auto jobs = all_jobs(a);
    for (const auto& [id, name] : acked) {
      INFO("round " << round << ": acknowledged job " << id);
      REQUIRE(jobs.count(id) == 1);
      CHECK(json_field(jobs.find(id)->second, "name") == name);
    }
    std::set<std::string> ids;
    for (const auto& [id, obj] : jobs) CHECK(ids.insert(id).second);
    a.stop(SIGKILL);
  }
  a.start();
  for (const auto& [id, name] : acked) {
    INFO("job " << id);
    CHECK(a.cli({"wait", id}).rc == 0);
    std::string js = stat_json(a, id);
    INFO(js);
    CHECK(json_field(js, "end_reason") == "completed");
    for (const auto& run : harness::runs_of(js)) CHECK(json_field(run, "end_reason") != "cancelled");
    // Ran once: never killed and run again, even when the agent died between the server's start
    // of the job and the agent's record of it.
    CHECK(harness::slurp(a.dir + "/work/ran." + id) == "x\n");
  }
}
