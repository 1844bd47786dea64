// What users of PBS and Grid Engine bring along, through a real corrald --standalone:
//   - their job scripts (docs/examples), submitted unchanged, run with the limits their
//     directives ask for; a directive Corral does not know is refused with its file and line;
//   - `corral stat -u/-P/-s/--mine` and, for a pending job, why it waits and its planned start;
//   - dependencies (-W depend=afterok|afterany|afternotok, -hold_jid): a job waits, is released,
//     or ends dependency_never_met; unknown ids are refused; a restart keeps them.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"

using harness::Agent;
using harness::json_field;
using harness::slurp;
using harness::stat_json;
using harness::trim;
using harness::wait_file;
using harness::wait_state;

namespace {
constexpr int kNobody = 65534;
constexpr int kOther = 65533;  // a second unprivileged uid (no passwd entry needed)

// The ids in a `corral stat --json` array, in order.
std::vector<std::string> ids_of(const std::string& js) {
  std::vector<std::string> out;
  for (std::size_t p = js.find("{\"id\":"); p != std::string::npos; p = js.find("{\"id\":", p + 1))
    out.push_back(js.substr(p + 6, js.find(',', p) - p - 6));
  return out;
}

// A copy of a sample script into the agent's work directory, as a user would have it.
std::string copy_example(const Agent& a, const std::string& name) {
  const std::string to = a.dir + "/work/" + name;
  std::ofstream(to) << slurp(std::string(EXAMPLES_DIR) + "/" + name);
  REQUIRE(!slurp(to).empty());
  return to;
}

// Starts `a`, submits the sample script `name` unchanged as nobody, and waits for its end; its id.
std::string run_example(Agent& a, const std::string& name) {
  a.start();
  auto s = a.submit({copy_example(a, name)}, kNobody);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  const std::string id = trim(s.out);
  REQUIRE(wait_state(a, id, "ended", 30000) == "ended");
  return id;
}

// Waits until the job's wait_reason is `want`; returns its stat JSON.
std::string wait_reason(const Agent& a, const std::string& id, const std::string& want) {
  std::string js;
  for (int t = 0; t < 10000; t += 20) {
    js = stat_json(a, id);
    if (json_field(js, "wait_reason") == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return js;
}
}  // namespace

TEST_CASE("an NCI-style PBS script runs unchanged with its limits", "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("pbsjob", {"--set", "declare_cores=2"});
  const std::string id = run_example(a, "nci-job.pbs");
  const std::string js = stat_json(a, id);
  INFO(js);
  CHECK(json_field(js, "end_reason") == "completed");
  CHECK(json_field(js, "name") == "nci_sample");
  CHECK(json_field(js, "project") == "a00");
  CHECK(json_field(js, "queue") == "normal");
  CHECK(json_field(js, "walltime") == "300");
  CHECK(json_field(js, "ncpus") == "2");
  CHECK(json_field(js, "mem_mb") == "256");
  CHECK(json_field(js, "jobfs_mb") == "64");
  // -j oe: one output file, stderr in it; PBS's variables set; the cpuset is 2 cores.
  CHECK(json_field(js, "stderr") == json_field(js, "stdout"));
  const std::string out = slurp(a.dir + "/work/nci_sample.o" + id);
  CHECK(out.find("job " + id + " (nci_sample) in queue normal") != std::string::npos);
  CHECK(out.find("ncpus 2\ncores 2\n") != std::string::npos);
  CHECK(out.find("this line goes to stderr") != std::string::npos);
  CHECK_FALSE(std::ifstream(a.dir + "/work/nci_sample.e" + id).good());
}

TEST_CASE("a Grid Engine script runs unchanged with its limits", "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("sgejob", {"--set", "declare_cores=2"});
  const std::string id = run_example(a, "sge-job.sh");
  const std::string js = stat_json(a, id);
  INFO(js);
  CHECK(json_field(js, "end_reason") == "completed");
  CHECK(json_field(js, "name") == "sge_sample");
  CHECK(json_field(js, "pe") == "smp");
  CHECK(json_field(js, "slots_min") == "1");
  CHECK(json_field(js, "slots_max") == "2");
  CHECK(json_field(js, "slots") == "2");  // both cores free: the largest count of the range
  CHECK(json_field(js, "walltime") == "300");
  CHECK(json_field(js, "mem_mb") == "512");  // h_vmem=256M is per slot: 2 slots
  const std::string out = slurp(a.dir + "/work/sge_sample.o" + id);
  CHECK(out.find("job " + id + " (sge_sample) in " + a.dir + "/work") != std::string::npos);
  CHECK(out.find("slots 2 of pe smp\ncores 2\n") != std::string::npos);
}

// Grid Engine's h_vmem is memory per slot: a job of a -pe range gets h_vmem times the slots it
// starts with, in its memory cgroup (read by the job itself) and in stat.
TEST_CASE("a Grid Engine job's h_vmem is per slot: its memory limit is h_vmem times its slots",
          "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("sgevmem", {"--set", "declare_cores=2"});
  a.start();
  const std::string script = a.dir + "/work/vmem.sh";
  std::ofstream(script) << "#!/bin/sh\n#$ -N vmem\n#$ -cwd\n#$ -pe smp 1-2\n#$ -l h_rt=60,h_vmem=1G\n"
                           "v1=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)\n"
                           "if [ -n \"$v1\" ]; then cat /sys/fs/cgroup/memory$v1/memory.limit_in_bytes\n"
                           "else cat \"$(awk '$3==\"cgroup2\" {print $2; exit}' /proc/mounts)$(sed -n 's/^0:://p' "
                           "/proc/self/cgroup)/memory.max\"; fi\n";
  auto s = a.submit({script}, kNobody);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  const std::string id = trim(s.out);
  REQUIRE(wait_state(a, id, "ended", 30000) == "ended");
  const std::string js = stat_json(a, id);
  INFO(js);
  CHECK(json_field(js, "end_reason") == "completed");
  CHECK(json_field(js, "slots") == "2");
  CHECK(json_field(js, "mem_mb") == "2048");
  CHECK(trim(slurp(a.dir + "/work/vmem.o" + id)) == std::to_string(2048LL << 20));

  // 4 slots, on an emulated node of 4 cores (this machine may have fewer): 4 GiB.
  Agent e("sgevmem4", {"--emulate", "cores=4", "--set", "fsync=no"});
  e.start();
  const std::string four = e.dir + "/work/vmem4.sh";
  std::ofstream(four) << "#!/bin/sh\n#CORRAL_EMULATE runtime=1h\n#$ -pe smp 4\n#$ -l h_rt=600,h_vmem=1G\n";
  s = e.submit({four}, kNobody);
  INFO(s.err << e.log());
  REQUIRE(s.rc == 0);
  const std::string id4 = trim(s.out);
  REQUIRE(wait_state(e, id4, "running", 10000) == "running");
  const std::string js4 = stat_json(e, id4);
  INFO(js4);
  CHECK(json_field(js4, "slots") == "4");
  CHECK(json_field(js4, "mem_mb") == "4096");
  CHECK(e.cli({"cancel", id4}).rc == 0);
}

TEST_CASE("a directive Corral does not know is refused with its file, line and text", "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("baddirective");
  a.start();
  const std::string script = a.dir + "/work/mail.pbs";
  std::ofstream(script) << "#!/bin/sh\n#PBS -l walltime=60\n#PBS -m abe\ntrue\n";
  auto s = a.submit({script}, kNobody);
  CHECK(s.rc == 2);
  CHECK(s.err.find(script + ":3: '#PBS -m abe': unknown option '-m'") != std::string::npos);
  CHECK(ids_of(a.cli({"stat", "--json"}).out).empty());  // nothing was submitted
}

TEST_CASE("stat filters, and why a pending job waits and when it is planned to start", "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("statwait", {"--set", "declare_cores=2", "--set", "policy=conservative", "--set", "duration_offset=0"});
  a.start();
  // 1 core busy for a minute; the head needs both (reserved for when it ends); a long 1-core job
  // would fit now but delay that reservation.
  auto r = a.submit({"-N", "busy", "-P", "p1", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 60"}, kNobody);
  REQUIRE(r.rc == 0);
  const std::string busy = trim(r.out);
  REQUIRE(wait_state(a, busy, "running") == "running");
  r = a.submit({"-N", "head", "-P", "p2", "-l", "ncpus=2,walltime=60", "--wrap", "true"}, kOther);
  REQUIRE(r.rc == 0);
  const std::string head = trim(r.out);
  r = a.submit({"-N", "long", "-P", "p2", "-l", "ncpus=1,walltime=3600", "--wrap", "true"}, kOther);
  REQUIRE(r.rc == 0);
  const std::string lng = trim(r.out);

  std::string js = wait_reason(a, head, "resources");
  INFO(js);
  CHECK(json_field(js, "wait_detail") == "waits for 2 cores (1 free) held by running jobs");
  CHECK(json_field(js, "planned_start") != "null");
  const double planned = std::stod(json_field(js, "planned_start"));
  const double started = std::stod(json_field(stat_json(a, busy), "start_time"));
  CHECK(planned >= started + 59);
  CHECK(planned <= started + 61);
  js = wait_reason(a, lng, "reservation");
  CHECK(json_field(js, "wait_detail").find("job " + head + " is reserved from") != std::string::npos);
  auto table = a.cli({"stat"});
  CHECK(table.out.find("resources: waits for 2 cores (1 free) held by running jobs; planned start") != std::string::npos);

  // Filters, in the table and in JSON.
  CHECK(ids_of(a.cli({"stat", "--json", "-u", "nobody"}).out) == std::vector<std::string>{busy});
  CHECK(ids_of(a.cli({"stat", "--json", "-u", std::to_string(kOther)}).out) == std::vector<std::string>{head, lng});
  CHECK(ids_of(a.cli({"stat", "--json", "-P", "p2"}).out) == std::vector<std::string>{head, lng});
  CHECK(ids_of(a.cli({"stat", "--json", "-s", "running"}).out) == std::vector<std::string>{busy});
  CHECK(ids_of(a.cli({"stat", "--json", "-s", "pending,running", "-P", "p1"}).out) == std::vector<std::string>{busy});
  CHECK(ids_of(a.cli({"stat", "--json", "--mine"}, kOther).out) == std::vector<std::string>{head, lng});
  CHECK(ids_of(a.cli({"stat", "--json", "--mine"}).out).empty());  // root has none
  CHECK(a.cli({"stat", "-u", "nobody"}).out.find(" busy ") != std::string::npos);
  CHECK(a.cli({"stat", "-u", "nobody"}).out.find(" head ") == std::string::npos);
  auto bad = a.cli({"stat", "-s", "queued"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("-s: unknown state 'queued'") != std::string::npos);
  CHECK(a.cli({"stat", busy, "-u", "nobody"}).rc == 2);
  a.cli({"cancel", busy, head, lng});
}

TEST_CASE("dependencies: afterok, afterany, afternotok, -hold_jid; never met; unknown ids", "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("depend", {"--set", "declare_cores=2"});
  a.start();
  const std::string go = a.dir + "/work/go";
  auto r = a.submit({"-N", "A", "-l", "walltime=60", "--wrap", "while [ ! -e " + go + " ]; do sleep 0.05; done"}, kNobody);
  REQUIRE(r.rc == 0);
  const std::string A = trim(r.out);
  auto dep = [&](std::vector<std::string> opts, const std::string& name) {
    opts.insert(opts.end(), {"-N", name, "-l", "walltime=60", "--wrap", "echo ran > " + name + ".ran"});
    auto s = a.submit(opts, kNobody);
    INFO(s.err);
    REQUIRE(s.rc == 0);
    return trim(s.out);
  };
  const std::string B = dep({"-W", "depend=afterok:" + A}, "B");
  const std::string C = dep({"-W", "depend=afternotok:" + A}, "C");
  const std::string D = dep({"-W", "depend=afterany:" + A}, "D");
  const std::string E = dep({"-hold_jid", A}, "E");
  const std::string F = dep({"-W", "depend=afterok:" + C}, "F");  // a chain: C never runs, so nor does F
  REQUIRE(wait_state(a, A, "running") == "running");
  std::string js = wait_reason(a, B, "dependency");
  CHECK(json_field(js, "state") == "pending");
  CHECK(json_field(js, "wait_detail") == "afterok:" + A + " (job " + A + " is running)");
  CHECK(js.find("\"depend\":[{\"type\":\"afterok\",\"job\":" + A + "}]") != std::string::npos);
  CHECK(a.cli({"stat"}).out.find("dependency: afterok:" + A) != std::string::npos);

  // Unknown ids are refused at submit; nothing is added.
  auto unknown = a.submit({"-W", "depend=afterok:" + A + ":999", "--wrap", "true"}, kNobody);
  CHECK(unknown.rc == 1);
  CHECK(unknown.err.find("dependency afterok:999: unknown job id 999") != std::string::npos);

  std::ofstream(go) << "go\n";
  for (const std::string& id : {A, B, D, E}) CHECK(wait_state(a, id, "ended", 20000) == "ended");
  for (const std::string& id : {B, D, E}) CHECK(json_field(stat_json(a, id), "end_reason") == "completed");
  REQUIRE(wait_state(a, F, "ended") == "ended");
  js = stat_json(a, C);
  CHECK(json_field(js, "end_reason") == "dependency_never_met");
  CHECK(json_field(js, "comment") == "afternotok:" + A + " can never be met: job " + A + " ended completed");
  CHECK(json_field(js, "runs") == "[]");
  js = stat_json(a, F);
  CHECK(json_field(js, "end_reason") == "dependency_never_met");
  CHECK(json_field(js, "comment") == "afterok:" + C + " can never be met: job " + C + " ended dependency_never_met");
  CHECK_FALSE(std::ifstream(a.dir + "/work/C.ran").good());

  // afterok on a job that failed; afternotok on it runs.
  r = a.submit({"-l", "walltime=60", "--wrap", "exit 3"}, kNobody);
  const std::string G = trim(r.out);
  const std::string H = dep({"-W", "depend=afterok:" + G}, "H");
  const std::string I = dep({"-W", "depend=afternotok:" + G}, "I");
  CHECK(wait_state(a, H, "ended") == "ended");
  CHECK(json_field(stat_json(a, H), "end_reason") == "dependency_never_met");
  CHECK(wait_state(a, I, "ended") == "ended");
  CHECK(json_field(stat_json(a, I), "end_reason") == "completed");
  // A dependency on a job that has ended already is judged at once.
  const std::string J = dep({"-W", "depend=afterok:" + B}, "J");
  CHECK(wait_state(a, J, "ended") == "ended");
  CHECK(json_field(stat_json(a, J), "end_reason") == "completed");
}

TEST_CASE("dependencies: a restart keeps a waiting job waiting, then releases it", "[agent][scripts]") {
  SKIP_UNLESS_ROOT();
  Agent a("dependrestart", {"--set", "declare_cores=2"});
  a.start();
  const std::string go = a.dir + "/work/go";
  auto r = a.submit({"-N", "X", "-l", "walltime=120", "--wrap", "while [ ! -e " + go + " ]; do sleep 0.05; done"}, kNobody);
  REQUIRE(r.rc == 0);
  const std::string X = trim(r.out);
  // As a directive, the way a PBS script asks for it.
  const std::string script = a.dir + "/work/after.pbs";
  std::ofstream(script) << "#!/bin/sh\n#PBS -W depend=afterok:" << X << "\n#PBS -N Y\necho ran > Y.ran\n";
  r = a.submit({script}, kNobody);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string Y = trim(r.out);
  REQUIRE(wait_state(a, X, "running") == "running");
  CHECK(json_field(wait_reason(a, Y, "dependency"), "wait_reason") == "dependency");
  a.stop(SIGTERM);
  a.start();
  std::string js = wait_reason(a, Y, "dependency");
  CHECK(json_field(js, "state") == "pending");
  CHECK(json_field(js, "wait_reason") == "dependency");
  CHECK_FALSE(std::ifstream(a.dir + "/work/Y.ran").good());
  std::ofstream(go) << "go\n";
  CHECK(wait_state(a, Y, "ended", 20000) == "ended");
  CHECK(json_field(stat_json(a, Y), "end_reason") == "completed");
  CHECK(wait_file(a.dir + "/work/Y.ran") == "ran\n");
}
