// A job across nodes, end to end: three voters of 2 cores each
// (tests/agent/mesh_cluster.hpp; each corrald in its own network namespace
// where the machine allows it). `-l select=2:ncpus=2` fits no single node: the
// coordinator places it on two, both start their share in their own cgroups,
// the script on the first sees both hosts in CORRAL_NODEFILE (and PBS_NODEFILE,
// PE_HOSTFILE), and when the script ends the other node's share is stopped.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "mesh_cluster.hpp"

using namespace harness;
using Json = nlohmann::json;
using namespace mesh_cluster;

namespace {

// `corral stat ID --json` on agent i once `done` holds for it (null after `ms`).
template <class Done>
Json job_when(const Mesh& m, unsigned i, std::uint64_t id, int ms, Done done) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    Result r = m.agents[i]->cli({"stat", std::to_string(id), "--json"});
    Json j = r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
    if (j.is_object() && done(j)) return j;
  }
  return Json();
}

// The processes in agent a's cgroups (its cgroup parent), each with its /proc/PID/cgroup.
std::map<std::string, std::string> procs_of(const Agent& a) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cg = slurp("/proc/" + pid + "/cgroup");
    if (cg.find("/" + a.cgparent + "/") != std::string::npos) out[pid] = cg;
  }
  return out;
}

// The agents the job's running run is on, as `corral stat` comments it ("on FIRST,OTHER"): the
// first node's (the script's) and the other's, by index.
std::pair<unsigned, unsigned> run_agents(const Mesh& m, const Json& j) {
  std::string on = j["runs"][0]["comment"];
  REQUIRE(on.rfind("on ", 0) == 0);
  std::string first = on.substr(3, on.find(',') - 3), other = on.substr(on.find(',') + 1);
  unsigned lead_i = 0, share_i = 0;
  for (unsigned i = 0; i < m.names.size(); ++i) {
    if (m.names[i] == first) lead_i = i;
    if (m.names[i] == other) share_i = i;
  }
  REQUIRE(lead_i != share_i);
  return {lead_i, share_i};
}

// Waits until `path` exists.
bool appears(const std::string& path, int ms) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if (std::filesystem::exists(path)) return true;
  return false;
}

constexpr int kNobody = 65534;

// Whether agent a's log says `text` within ms (a line may follow what the test saw happen).
bool logged(const Agent& a, const std::string& text, int ms) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if (a.log().find(text) != std::string::npos) return true;
  return false;
}

// The pid of `sleep SECONDS` in agent a's cgroups ("" when none within 10 s).
std::string process_of(const Agent& a, const std::string& seconds) {
  const std::string cmdline = std::string("sleep") + '\0' + seconds + '\0';
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    for (const auto& [pid, cg] : procs_of(a))
      if (slurp("/proc/" + pid + "/cmdline") == cmdline) return pid;
  return "";
}

// Waits until process `pid` is gone (reaped).
bool gone(const std::string& pid, int ms) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if (!std::filesystem::exists("/proc/" + pid)) return true;
  return false;
}

// Submits `script` on agent 0 as a job of two nodes (2 cpus on each) of user nobody; its id.
std::string submit_two_nodes(const Mesh& m, const std::string& script) {
  Result r = m.agents[0]->submit({"-l", "select=2:ncpus=2,walltime=120", "--wrap", script}, kNobody);
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  return trim(r.out);
}

// DIR/rank.sh: one line of an MPI rank (Open MPI's or MPICH's rank variable), its node and the
// job's cgroup it runs in.
void write_rank_script(const std::string& dir) {
  {
    std::ofstream rank(dir + "/rank.sh");
    rank << "#!/bin/sh\necho \"rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK} node=$CORRAL_NODE "
            "cgroup=$(grep -m 1 /job. /proc/self/cgroup)\"\n";
  }
  std::filesystem::permissions(dir + "/rank.sh", std::filesystem::perms(0755));
}

// Four ranks in `output`, two on each node of job `id`'s run (j), each in that node's cgroups for
// the job.
void check_ranks(const Mesh& m, const Json& j, const std::string& id, const std::string& output) {
  const auto [lead_i, share_i] = run_agents(m, j);
  std::map<std::string, std::string> ranks;  // rank -> its line
  std::istringstream lines(slurp(output));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("rank=", 0) == 0) ranks[line.substr(5, line.find(' ') - 5)] = line;
  REQUIRE(ranks.size() == 4);
  std::map<unsigned, int> per_node;
  for (const auto& [rank, line] : ranks)
    for (unsigned i : {lead_i, share_i})
      if (line.find("node=" + m.names[i] + " ") != std::string::npos &&
          line.find("/" + m.agents[i]->cgparent + "/job." + id) != std::string::npos)
        ++per_node[i];
  CHECK(per_node[lead_i] == 2);
  CHECK(per_node[share_i] == 2);
}

// Runs `launch` as a 2-node job of user nobody, its output in dir/mpi.out and mpi.err, its exit
// status in mpi.rc: it ends 0 and its four ranks are placed as check_ranks says.
void run_mpi_job(const Mesh& m, const std::string& what, const std::string& launch, const std::string& dir) {
  const std::string id = submit_two_nodes(
      m, launch + " > " + dir + "/mpi.out 2> " + dir + "/mpi.err; echo $? > " + dir + "/mpi.rc");
  Json j = job_when(m, 1, std::stoull(id), 60000, [](const Json& x) { return x["state"] == "ended"; });
  INFO(j.dump() << "\n" << what << "'s stdout:\n" << slurp(dir + "/mpi.out") << what << "'s stderr:\n"
                << slurp(dir + "/mpi.err"));
  REQUIRE(j.is_object());
  CHECK(trim(slurp(dir + "/mpi.rc")) == "0");
  check_ranks(m, j, id, dir + "/mpi.out");
}

}  // namespace

TEST_CASE("mesh: a job larger than a node runs across two, each node's share in its cgroups", "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  m.elect();
  const std::string out = m.agents[0]->dir + "/work";
  const std::string script = "cat \"$CORRAL_NODEFILE\" > " + out + "/nodes; cat \"$PE_HOSTFILE\" > " + out +
                             "/pe; [ \"$PBS_NODEFILE\" = \"$CORRAL_NODEFILE\" ] && touch " + out +
                             "/same; while [ ! -e " + out + "/go ]; do sleep 0.05; done";
  Result r = m.agents[0]->submit({"-l", "select=2:ncpus=2,walltime=120", "--wrap", script});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  std::uint64_t id = std::stoull(r.out);

  // Running on two nodes, as the replicated run says.
  Json j = job_when(m, 1, id, 20000, [](const Json& x) { return x["state"] == "running"; });
  INFO(j.dump() << m.agents[0]->log() << m.agents[1]->log() << m.agents[2]->log());
  REQUIRE(j.is_object());
  REQUIRE(j["runs"].size() == 1);
  const auto [lead_i, share_i] = run_agents(m, j);
  const std::string first = m.names[lead_i], other = m.names[share_i];

  // The script's host files: two slots on each node, the script's node first.
  CHECK(appears(out + "/same", 10000));
  CHECK(slurp(out + "/nodes") == first + "\n" + first + "\n" + other + "\n" + other + "\n");
  CHECK(slurp(out + "/pe") == first + " 2 normal@" + first + " UNDEFINED\n" + other + " 2 normal@" + other +
                                  " UNDEFINED\n");

  // Each node holds its share in its own cgroups for the job: the script on the first, the
  // share's holder on the other (cgroups named for the job under each agent's parent).
  std::map<std::string, std::string> lead_procs, share_procs;
  for (double end = now_ms() + 10000; now_ms() < end && (lead_procs.empty() || share_procs.empty());
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    lead_procs = procs_of(*m.agents[lead_i]);
    share_procs = procs_of(*m.agents[share_i]);
  }
  REQUIRE_FALSE(lead_procs.empty());
  REQUIRE_FALSE(share_procs.empty());
  for (const auto& [pid, cg] : share_procs) CHECK(cg.find("/" + m.agents[share_i]->cgparent + "/job." + std::to_string(id)) != std::string::npos);
  for (const auto& [pid, cg] : lead_procs) CHECK(cg.find("/" + m.agents[lead_i]->cgparent + "/job." + std::to_string(id)) != std::string::npos);
  CHECK(m.agents[share_i]->log().find("a share of 2 cpus here, the script runs on " + first) != std::string::npos);

  // The script ends: the job completes, and the other node's share is stopped and its cgroups go.
  { std::ofstream(out + "/go").put('\n'); }
  j = job_when(m, 1, id, 20000, [](const Json& x) { return x["state"] == "ended"; });
  REQUIRE(j.is_object());
  CHECK(j["end_reason"] == "completed");
  CHECK(leftovers(*m.agents[share_i], {}, 15000) == "");
  CHECK(leftovers(*m.agents[lead_i], {}, 15000) == "");
}

// `corral exec` from inside a 2-node job, run as a user (nobody): the command runs on the other
// node in that node's cgroups for the job as the job's user, its output and exit status come
// back, its stdin goes there (-n: none); a process outside the job and a node outside the run are
// refused; a caller killed has
// its process there stopped; a call whose node goes silent fails, and its process is stopped once
// the node answers again; the job's end stops what it started there.
TEST_CASE("mesh: corral exec runs a job's process on its other node, only from inside the job", "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  m.elect();
  const std::string out = m.agents[0]->dir + "/work";
  const std::string c = std::filesystem::absolute(m.agents[0]->corral()).string();
  const std::string script =
      "first=$(head -n 1 \"$CORRAL_NODEFILE\"); other=$(grep -vx \"$first\" \"$CORRAL_NODEFILE\" | head -n 1); " +
      c + " exec \"$other\" 'cat /proc/self/cgroup; id -u; echo on-stderr >&2; exit 7' > " + out + "/x.out 2> " +
      out + "/x.err; echo $? > " + out + "/x.rc; " +
      // stdin relayed in order (some chunks of it), its end closing the command's stdin; -n: none
      "printf 'x\\ny\\n' | " + c + " exec \"$other\" 'cat; echo end' > " + out + "/in.out; echo $? > " + out +
      "/in.rc; seq 1 30000 | " + c + " exec \"$other\" 'md5sum' > " + out + "/seq.out; echo z | " + c +
      " exec -n \"$other\" 'cat; echo none' > " + out + "/n.out; " +
      c + " exec nosuchnode true 2> " + out + "/bad.err; echo $? > " +
      out + "/bad.rc; " + c + " exec \"$other\" exec sleep 301 > /dev/null 2>&1 & echo $! > " + out +
      "/caller.pid; (" + c + " exec \"$other\" exec sleep 302 > /dev/null 2> " + out + "/lost.err; echo $? > " + out +
      "/lost.rc) & (while [ ! -e " + out + "/again ]; do sleep 0.05; done; " + c +
      " exec \"$other\" exec sleep 300 > /dev/null 2>&1) & touch " + out + "/ready; while [ ! -e " + out +
      "/go ]; do sleep 0.05; done";
  const std::string id = submit_two_nodes(m, script);
  Json j = job_when(m, 1, std::stoull(id), 20000, [](const Json& x) { return x["state"] == "running"; });
  INFO(j.dump() << m.agents[0]->log() << m.agents[1]->log() << m.agents[2]->log());
  REQUIRE(j.is_object());
  const auto [lead_i, share_i] = run_agents(m, j);
  const Agent& share = *m.agents[share_i];

  // The command ran on the other node, in its cgroups for the job, as the job's user.
  REQUIRE(appears(out + "/ready", 20000));
  INFO("out: " << slurp(out + "/x.out") << "err: " << slurp(out + "/x.err"));
  CHECK(trim(slurp(out + "/x.rc")) == "7");
  CHECK(slurp(out + "/x.out").find("/" + share.cgparent + "/job." + id + "\n") != std::string::npos);
  CHECK(slurp(out + "/x.out").find("\n" + std::to_string(kNobody) + "\n") != std::string::npos);
  CHECK(slurp(out + "/x.err") == "on-stderr\n");
  CHECK(trim(slurp(out + "/in.rc")) == "0");
  CHECK(slurp(out + "/in.out") == "x\ny\nend\n");
  Result seq = run({"/bin/sh", "-c", "seq 1 30000 | md5sum"});
  CHECK(slurp(out + "/seq.out") == seq.out);
  CHECK(slurp(out + "/n.out") == "none\n");
  CHECK(trim(slurp(out + "/bad.rc")) == "255");
  CHECK(slurp(out + "/bad.err").find("node nosuchnode is not one of the nodes of job " + id) != std::string::npos);

  // A process outside the job naming it is refused, whatever CORRAL_JOBID says.
  Result outside = run({c, "exec", "--socket", m.agents[lead_i]->socket, m.names[share_i], "true"}, -1, out,
                       {"CORRAL_JOBID=" + id});
  CHECK(outside.rc == 255);
  CHECK(outside.err.find("is not a process of job " + id) != std::string::npos);

  // Its caller killed (`corral exec` of `sleep 301` gets SIGTERM): what it started on the other
  // node is stopped; the job goes on.
  const std::string stopped = process_of(share, "301");
  REQUIRE_FALSE(stopped.empty());
  REQUIRE(appears(out + "/caller.pid", 10000));
  double t0 = now_ms();
  REQUIRE(::kill(std::stoi(slurp(out + "/caller.pid")), SIGTERM) == 0);
  CHECK(gone(stopped, 10000));
  WARN("the process of a killed corral exec gone after " << now_ms() - t0 << " ms");
  CHECK(logged(share, "): stopped: its caller went away", 5000));

  // The other node's agent silent (SIGSTOP) for longer than 5 s: the call of `sleep 302` fails
  // with why; once that agent runs again, the process of the failed call is stopped.
  const std::string lost = process_of(share, "302");
  REQUIRE_FALSE(lost.empty());
  t0 = now_ms();
  REQUIRE(::kill(share.pid, SIGSTOP) == 0);
  const bool failed = appears(out + "/lost.rc", 15000);
  ::kill(share.pid, SIGCONT);
  REQUIRE(failed);
  WARN("a corral exec whose node went silent failed after " << now_ms() - t0 << " ms");
  CHECK(trim(slurp(out + "/lost.rc")) == "255");
  CHECK(slurp(out + "/lost.err").find("node " + m.names[share_i] + " has not answered for 5 s") != std::string::npos);
  CHECK(gone(lost, 15000));

  // A backgrounded `sleep 300` runs on the other node in the job's cgroups, as the user.
  { std::ofstream(out + "/again").put('\n'); }
  const std::string sleeper = process_of(share, "300");
  REQUIRE_FALSE(sleeper.empty());
  CHECK(slurp("/proc/" + sleeper + "/status").find("Uid:\t" + std::to_string(kNobody) + "\t") != std::string::npos);

  // The script ends: the job completes and what it started on the other node is stopped.
  { std::ofstream(out + "/go").put('\n'); }
  j = job_when(m, 1, std::stoull(id), 20000, [](const Json& x) { return x["state"] == "ended"; });
  REQUIRE(j.is_object());
  CHECK(j["end_reason"] == "completed");
  CHECK(leftovers(share, {static_cast<pid_t>(std::stol(sleeper))}, 15000) == "");
}

// Open MPI's mpirun inside a 2-node job (of user nobody) with `corral exec` as its remote
// launcher: ranks start on both nodes, each in its node's cgroups for the job.
TEST_CASE("mesh: mpirun starts ranks on both nodes of a job through corral exec", "[mesh]") {
  SKIP_UNLESS_ROOT();
  if (::access("/usr/bin/mpirun", X_OK) != 0) {
    CORRAL_SKIP("no /usr/bin/mpirun (Debian's openmpi-bin, tools/setup)");
    return;
  }
  Mesh m(3);
  m.elect();
  const std::string out = m.agents[0]->dir + "/work";
  const std::string c = std::filesystem::absolute(m.agents[0]->corral()).string();
  write_rank_script(out);
  // The nodes here share one /tmp and one host name, which real nodes do not: each node's Open
  // MPI daemon gets a session directory of its own (TMPDIR), else two of them race to make the
  // same one ("mkdir: File exists"). The launcher is `corral exec` all the same.
  {
    std::ofstream agent(out + "/agent.sh");
    agent << "#!/bin/sh\nnode=$1; shift\nd=" << out << "/tmp-$node\nexec " << c
          << " exec \"$node\" \"mkdir -p $d && TMPDIR=$d\" \"$@\"\n";
  }
  std::filesystem::permissions(out + "/agent.sh", std::filesystem::perms(0755));
  // The rsh launcher with `corral exec` (no PBS TM or Grid Engine launcher is picked: the job
  // sets neither PBS_ENVIRONMENT nor SGE_ROOT); ranks unbound (each node's cpuset is the job's).
  run_mpi_job(m, "mpirun",
              "mkdir -p " + out + "/tmp-hnp && TMPDIR=" + out +
                  "/tmp-hnp mpirun --hostfile \"$CORRAL_NODEFILE\" --mca plm rsh --mca plm_rsh_agent " + out +
                  "/agent.sh --bind-to none -np 4 " + out + "/rank.sh",
              out);
}

// MPICH's mpiexec inside a 2-node job with `corral-rsh` (corral exec under one name) as its
// launcher: its proxies start on both nodes through corral exec, and so do the ranks.
TEST_CASE("mesh: MPICH's mpiexec starts ranks on both nodes through corral-rsh", "[mesh]") {
  SKIP_UNLESS_ROOT();
  if (::access("/usr/bin/mpiexec.hydra", X_OK) != 0) {
    CORRAL_SKIP("no /usr/bin/mpiexec.hydra (Debian's mpich, tools/setup)");
    return;
  }
  Mesh m(3);
  m.elect();
  const std::string out = m.agents[0]->dir + "/work";
  write_rank_script(out);
  std::filesystem::create_symlink(std::filesystem::absolute(m.agents[0]->corral()), out + "/corral-rsh");
  // The nodes here share one host name, which resolves to 127.0.0.1 in every namespace: the
  // proxies are told the launching node's own address to call back (-localhost).
  run_mpi_job(m, "mpiexec",
              "h=$(ip -4 -o addr show scope global | awk '{split($4,a,\"/\"); print a[1]; exit}'); "
              "mpiexec.hydra -launcher rsh -launcher-exec " + out + "/corral-rsh -f \"$CORRAL_NODEFILE\" "
              "-localhost ${h:-127.0.0.1} -n 4 " + out + "/rank.sh",
              out);
}
