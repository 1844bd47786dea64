// Job control through the mesh, end to end on three corrald: the coordinator's own preemption
// decisions (an NCI express job suspends a normal one on its node, which resumes when it ends)
// and users' suspend, resume and requeue from any node, with a standalone node's permissions.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "mesh_cluster.hpp"

using namespace harness;
using Json = nlohmann::json;
using namespace mesh_cluster;

namespace {

constexpr int kNobody = 65534, kOther = 65533;

Json job_of(const Mesh& m, unsigned i, std::uint64_t id) {
  Result r = m.agents[i]->cli({"stat", std::to_string(id), "--json"});
  return r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
}

// Waits until member i shows job `id` in `state`; the last view.
Json wait_mesh_state(const Mesh& m, unsigned i, std::uint64_t id, const std::string& state, int ms = 10000) {
  Json j;
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    j = job_of(m, i, id);
    if (j.is_object() && j["state"] == state) break;
  }
  return j;
}

std::uint64_t submit_ok(const Agent& a, std::vector<std::string> args, int uid = -1) {
  Result r = a.submit(std::move(args), uid);
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  return std::stoull(r.out);
}

// A job that writes its pid to work/TAG.pid (in the submitting agent's work directory) and sleeps.
std::string pid_then_sleep(const std::string& tag, int s) {
  return "echo $$ > " + tag + ".pid; sleep " + std::to_string(s);
}

// Waits until member i shows `key` of `name` (a job or ID[INDEX]) as `value`; the last view.
Json wait_field(const Mesh& m, unsigned i, const std::string& name, const std::string& key, const std::string& value) {
  Json j;
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    Result r = m.agents[i]->cli({"stat", name, "--json"});
    j = r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
    if (j.is_object() && j[key].is_string() && j[key] == value) break;
  }
  return j;
}

// Array `bid` (-J 1-3%1 of `sleep 30`, user nobody; `after_b` depends afterany on it), each step
// through another member than the one before: its task 3 held and released ahead of its turn,
// then the whole array; its cancel stops task 1, and the array ends only with that task's end.
void hold_release_cancel(const Mesh& m, int l, std::uint64_t bid, std::uint64_t after_b) {
  const std::string bs = std::to_string(bid), t3 = bs + "[3]";
  const Agent& n0 = *m.agents[static_cast<unsigned>(l)];
  const Agent& n1 = *m.agents[(static_cast<unsigned>(l) + 1) % 3];
  const Agent& n2 = *m.agents[(static_cast<unsigned>(l) + 2) % 3];
  REQUIRE(wait_field(m, 0, bs + "[1]", "state", "running")["state"] == "running");
  Result h = n2.cli({"hold", t3}, kNobody);
  INFO(h.out << h.err);
  REQUIRE(h.rc == 0);
  CHECK(wait_field(m, 1, t3, "wait_reason", "held")["wait_detail"].get<std::string>().rfind("held by nobody (user hold)", 0) == 0);
  REQUIRE(n0.cli({"release", t3}, kNobody).rc == 0);
  // Released, it waits for task 1: its array's %1, named as such.
  Json w3 = wait_field(m, 2, t3, "wait_reason", "array_limit");
  CHECK(w3["wait_reason"] == "array_limit");
  CHECK(w3["wait_detail"] == "job array " + bs + " runs its limit of 1 tasks at once (%1): it starts when one of them ends");
  Result ha = n1.cli({"hold", bs}, kNobody);
  INFO(ha.out << ha.err);
  REQUIRE(ha.rc == 0);
  CHECK(wait_field(m, 2, t3, "wait_reason", "held")["wait_reason"] == "held");
  CHECK(n2.cli({"release", bs}, kOther).rc != 0);  // not another user
  REQUIRE(n2.cli({"release", bs}, kNobody).rc == 0);
  CHECK(wait_field(m, 0, t3, "wait_reason", "array_limit")["wait_reason"] == "array_limit");
  // The cancel ends waiting task 3 at once; the array lives on until running task 1 has ended.
  Result c = n0.cli({"cancel", bs}, kNobody);
  INFO(c.out << c.err);
  CHECK(c.out == bs + " cancelling\n");
  Json b = wait_mesh_state(m, 1, bid, "ended");
  CHECK(b["end_reason"] == "cancelled");
  CHECK(b["comment"] == "cancelled by nobody");
  Json b1 = Json::parse(n2.cli({"stat", bs + "[1]", "--json"}).out);
  CHECK(b1["end_reason"] == "cancelled");
  CHECK(b["end_time"] == b1["end_time"]);  // ended with task 1's end, not at the cancel
  CHECK(Json::parse(n1.cli({"stat", t3, "--json"}).out)["end_reason"] == "cancelled");
  Result never = n0.cli({"stat", bs + "[2]"});
  CHECK(never.err.find("never ran: its array was ended (cancelled)") != std::string::npos);
  // afterany on the array: started only once the array, task 1 with it, had ended.
  Json a = wait_mesh_state(m, 2, after_b, "ended");
  CHECK(a["end_reason"] == "completed");
  CHECK(a["start_time"].get<double>() >= b1["end_time"].get<double>());
}

}  // namespace

TEST_CASE("mesh control: the coordinator's NCI pass suspends a normal job on its node and resumes it",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Mesh m(3);
  for (auto& a : m.agents)
    a->extra.insert(a->extra.end(), {"--set", "nci=yes", "--set", "nci_require=walltime", "--set",
                                     "queues=normal:1,express:2", "--set", "poll_interval=0.2"});
  REQUIRE(m.elect() >= 0);
  // Three normal jobs fill the three nodes' 2 cores each.
  std::vector<std::uint64_t> normal;
  for (unsigned k = 0; k < 3; ++k)
    normal.push_back(submit_ok(*m.agents[0], {"-N", "n" + std::to_string(k), "-l", "ncpus=2,walltime=600",
                                              "--wrap", pid_then_sleep("n" + std::to_string(k), 300)}));
  for (auto id : normal) REQUIRE(wait_mesh_state(m, 1, id, "running")["state"] == "running");
  // An express job: NCI's priority-run suspends one of them for it.
  std::uint64_t ex = submit_ok(*m.agents[1], {"-q", "express", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 3"});
  Json e = wait_mesh_state(m, 2, ex, "running");
  INFO(e.dump() << m.agents[0]->log());
  REQUIRE(e["state"] == "running");
  std::uint64_t victim = 0;
  for (std::size_t k = 0; k < normal.size(); ++k) {
    Json j = job_of(m, 2, normal[k]);
    if (j["state"] == "suspended") victim = k + 1;
  }
  REQUIRE(victim != 0);
  const std::string tag = "n" + std::to_string(victim - 1);
  const std::string pid = trim(wait_file(m.agents[0]->dir + "/work/" + tag + ".pid"));
  // Frozen on its node by the order (the state is replicated before the node acts on it).
  std::string fz;
  for (double end = now_ms() + 5000; now_ms() < end && fz != "FROZEN"; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    fz = freezer_state(pid);
  CHECK(fz == "FROZEN");
  // The express job ends: the pass resumes the suspended one, thawed on its node.
  CHECK(wait_mesh_state(m, 0, ex, "ended", 15000)["end_reason"] == "completed");
  CHECK(wait_mesh_state(m, 0, normal[victim - 1], "running")["state"] == "running");
  for (double end = now_ms() + 5000; now_ms() < end && fz != "THAWED"; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    fz = freezer_state(pid);
  CHECK(fz == "THAWED");
  for (auto id : normal) m.agents[0]->cli({"cancel", std::to_string(id)});
}

TEST_CASE("mesh control: suspend, resume and requeue from any node, with a standalone node's permissions",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Mesh m(3);
  int l = m.elect();
  REQUIRE(l >= 0);
  const unsigned follower = (static_cast<unsigned>(l) + 1) % 3;
  std::uint64_t id = submit_ok(*m.agents[0], {"-l", "ncpus=1,walltime=600", "--wrap", pid_then_sleep("mine", 300)}, kNobody);
  REQUIRE(wait_mesh_state(m, follower, id, "running")["state"] == "running");
  const std::string sid = std::to_string(id);
  const std::string pid = trim(wait_file(m.agents[0]->dir + "/work/mine.pid"));

  // Another user, through a follower: neither suspend nor requeue.
  Result no = m.agents[follower]->cli({"suspend", sid}, kOther);
  CHECK(no.rc != 0);
  CHECK(no.err.find("only root or an operator may suspend") != std::string::npos);
  Result noq = m.agents[follower]->cli({"requeue", sid}, kOther);
  CHECK(noq.rc != 0);
  CHECK(noq.err.find("belongs to nobody") != std::string::npos);
  // Its owner may not suspend either; root may, from any node.
  CHECK(m.agents[follower]->cli({"suspend", sid}, kNobody).rc != 0);
  Result sus = m.agents[follower]->cli({"suspend", sid});
  INFO(sus.out << sus.err);
  CHECK(sus.rc == 0);
  CHECK(sus.out == sid + " suspended\n");
  CHECK(wait_mesh_state(m, 0, id, "suspended")["state"] == "suspended");  // agent 0 applies it in its own time
  std::string fz;
  for (double end = now_ms() + 5000; now_ms() < end && fz != "FROZEN"; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    fz = freezer_state(pid);
  CHECK(fz == "FROZEN");
  Result res = m.agents[(follower + 1) % 3]->cli({"resume", sid});
  CHECK(res.rc == 0);
  for (double end = now_ms() + 5000; now_ms() < end && fz != "THAWED"; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    fz = freezer_state(pid);
  CHECK(fz == "THAWED");

  // Its owner requeues it through another node: the run ends preempted, and it runs again.
  Result rq = m.agents[2]->cli({"requeue", sid}, kNobody);
  INFO(rq.err);
  CHECK(rq.rc == 0);
  Json j;
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    j = job_of(m, 1, id);
    if (j.is_object() && j["runs"].size() == 2 && j["state"] == "running") break;
  }
  INFO(j.dump());
  REQUIRE(j["runs"].size() == 2);
  CHECK(j["runs"][0]["end_reason"] == "preempted");
  CHECK(j["state"] == "running");
  CHECK(m.agents[0]->cli({"cancel", sid}).rc == 0);
}

TEST_CASE("mesh control: a dependent job starts only after its parent ended on another node; wait anywhere",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  REQUIRE(m.elect() >= 0);
  const std::string go = m.agents[0]->dir + "/work/go";
  std::uint64_t parent = submit_ok(*m.agents[0], {"-l", "walltime=60", "--wrap", "while [ ! -e " + go + " ]; do sleep 0.05; done"}, kNobody);
  const std::string pid = std::to_string(parent);
  std::uint64_t child = submit_ok(*m.agents[1], {"-W", "depend=afterok:" + pid, "-l", "walltime=60", "--wrap", "true"}, kNobody);
  std::uint64_t never = submit_ok(*m.agents[2], {"-W", "depend=afternotok:" + pid, "--wrap", "true"}, kNobody);
  std::uint64_t unknown = submit_ok(*m.agents[2], {"-hold_jid", "999", "--wrap", "true"}, kNobody);
  Json p = wait_mesh_state(m, 1, parent, "running");
  REQUIRE(p["state"] == "running");
  // The parent's node, and another one to wait on.
  const std::string on = p["runs"].back()["comment"].get<std::string>();  // "on nK"
  unsigned other = 0;
  while (on == "on " + m.names[other]) ++other;

  Json u = wait_mesh_state(m, 0, unknown, "ended");
  CHECK(u["end_reason"] == "dependency_never_met");
  CHECK(u["comment"] == "afterany:999 can never be met: job 999 is unknown");  // -hold_jid: afterany
  Json c = job_of(m, 0, child);
  CHECK(c["state"] == "pending");  // its parent runs
  CHECK(c["runs"].empty());

  // corral wait on a node the parent does not run on: answered when it ends there.
  const Agent& a = *m.agents[other];
  auto w = std::async(std::launch::async, [&a, pid] {
    return run({"/usr/bin/timeout", "20", a.corral(), "wait", pid, "--socket", a.socket}, -1, a.dir + "/work");
  });
  std::ofstream(go) << "go\n";
  Result wr = w.get();
  INFO(wr.out << wr.err);
  CHECK(wr.rc == 0);
  p = job_of(m, other, parent);
  CHECK(p["end_reason"] == "completed");
  c = wait_mesh_state(m, 2, child, "ended");
  CHECK(c["end_reason"] == "completed");
  REQUIRE(c["runs"].size() == 1);
  CHECK(c["runs"][0]["start"].get<double>() >= p["end_time"].get<double>());
  Json n = wait_mesh_state(m, 1, never, "ended");
  CHECK(n["end_reason"] == "dependency_never_met");
  CHECK(n["comment"] == "afternotok:" + pid + " can never be met: job " + pid + " ended completed");
}

TEST_CASE("mesh control: suspend and resume reach every node of a job across nodes; a job larger "
          "than the mesh is turned away",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Mesh m(3);  // three nodes of 2 cores
  int l = m.elect();
  REQUIRE(l >= 0);
  const unsigned follower = (static_cast<unsigned>(l) + 1) % 3;
  std::uint64_t id = submit_ok(*m.agents[0], {"-l", "select=2:ncpus=2,walltime=600", "--wrap", "sleep 300"}, kNobody);
  Json j = wait_mesh_state(m, follower, id, "running", 20000);
  INFO(j.dump());
  REQUIRE(j["state"] == "running");
  // One process of the job on each of its two nodes (the script, the share's holder).
  std::vector<std::string> pids;
  for (double end = now_ms() + 10000; now_ms() < end && pids.size() < 2; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    pids.clear();
    for (const auto& a : m.agents)
      if (auto p = job_pids(*a, id); !p.empty()) pids.push_back(p.front());
  }
  REQUIRE(pids.size() == 2);
  auto all_in = [&](const std::string& want) {
    bool ok = false;
    for (double end = now_ms() + 5000; now_ms() < end && !ok; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
      ok = freezer_state(pids[0]) == want && freezer_state(pids[1]) == want;
    return ok;
  };
  const std::string sid = std::to_string(id);
  REQUIRE(m.agents[follower]->cli({"suspend", sid}).rc == 0);
  CHECK(all_in("FROZEN"));
  REQUIRE(m.agents[(follower + 1) % 3]->cli({"resume", sid}).rc == 0);
  CHECK(all_in("THAWED"));
  CHECK(m.agents[follower]->cli({"cancel", sid}).rc == 0);
  CHECK(wait_mesh_state(m, 0, id, "ended")["end_reason"] == "cancelled");

  // 7 cpus, on three nodes of 2: refused at submit once the coordinator has heard from every
  // node; one accepted before that ends "rejected" instead of waiting for ever.
  Result r;
  for (double end = now_ms() + 15000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    r = m.agents[follower]->submit({"-l", "ncpus=7", "--wrap", "true"}, kNobody);
    if (r.rc != 0) break;
    Json early = wait_mesh_state(m, follower, std::stoull(r.out), "ended");
    CHECK(early["end_reason"] == "rejected");
  }
  INFO(r.out << r.err);
  CHECK(r.rc != 0);
  CHECK(r.err.find("the job asks for 7 cpus; the mesh's 3 node(s) have 6 cores in all") != std::string::npos);
}

TEST_CASE("mesh control: a job array through a follower: each task once with its index, %2 at once, "
          "stat and cancel of one task from another node; a whole array and one task held, released "
          "and cancelled from other nodes",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  int l = m.elect();
  REQUIRE(l >= 0);
  const Agent& f = *m.agents[(static_cast<unsigned>(l) + 1) % 3];
  const Agent& other = *m.agents[(static_cast<unsigned>(l) + 2) % 3];
  const std::string work = f.dir + "/work";
  // Each task: its index into its own output, its index variables and its start and end (ns) into
  // a log all tasks share (the nodes share this machine's clock).
  const std::uint64_t id = submit_ok(f, {"-J", "1-6%2", "-N", "arr", "-l", "ncpus=1,walltime=60", "--wrap",
                                         "echo $CORRAL_ARRAY_INDEX; "
                                         "echo \"$CORRAL_ARRAY_INDEX $PBS_ARRAY_INDEX $SGE_TASK_ID start $(date +%s%N)\" >> runs; "
                                         "sleep 0.4; echo \"$CORRAL_ARRAY_INDEX end $(date +%s%N)\" >> runs"},
                                     kNobody);
  const std::string sid = std::to_string(id);
  // Task 6 (not handed out yet: %2), cancelled through another node: by its owner, not by another user.
  Result no = other.cli({"cancel", sid + "[6]"}, kOther);
  CHECK(no.rc != 0);
  CHECK(no.err.find("belongs to nobody") != std::string::npos);
  Result c6 = other.cli({"cancel", sid + "[6]"}, kNobody);
  INFO(c6.out << c6.err);
  CHECK(c6.rc == 0);
  // Jobs that depend on the array, as on a standalone node: on all its tasks' ends.
  const std::uint64_t if_ok = submit_ok(other, {"-W", "depend=afterok:" + sid, "--wrap", "true"}, kNobody);
  const std::uint64_t if_not = submit_ok(other, {"-W", "depend=afternotok:" + sid, "--wrap", "true"}, kNobody);
  const Agent& lead = *m.agents[static_cast<unsigned>(l)];
  auto waited = std::async(std::launch::async, [&lead, sid] {
    return run({"/usr/bin/timeout", "30", lead.corral(), "wait", sid, "--socket", lead.socket}, -1, lead.dir + "/work");
  });
  // A second array, %1, whose first task runs until it is cancelled.
  const std::uint64_t bid = submit_ok(f, {"-J", "1-3%1", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 30"}, kNobody);
  const std::uint64_t after_b = submit_ok(other, {"-W", "depend=afterany:" + std::to_string(bid), "--wrap", "true"}, kNobody);
  hold_release_cancel(m, l, bid, after_b);

  // Never more than 2 tasks running, seen from a third node while the array runs.
  Json a;
  std::int64_t most = 0;
  for (double end = now_ms() + 20000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    a = job_of(m, 0, id);
    if (!a.is_object()) continue;
    most = std::max(most, a["array_tasks"]["running"].get<std::int64_t>());
    if (a["state"] == "ended") break;
  }
  INFO(a.dump());
  REQUIRE(a["state"] == "ended");
  CHECK(most <= 2);
  CHECK(a["end_reason"] == "failed");  // task 6 was cancelled
  CHECK(a["comment"] == "1 of 6 tasks did not complete");
  CHECK(a["array_tasks"]["ended"] == 6);
  CHECK(a["array_tasks"]["failed"] == 1);
  CHECK(a["end_time"].is_number());
  Result w = waited.get();
  INFO(w.err);
  CHECK(w.rc == 1);  // answered when the array ended: its exit code
  CHECK(w.err.find("1 of 6 tasks did not complete") != std::string::npos);

  // Each of tasks 1-5 ran exactly once with its index in its environment, never more than 2 at once.
  std::map<int, int> starts;
  std::vector<std::pair<long long, int>> edges;  // (time, +1 start / -1 end)
  std::istringstream log(slurp(work + "/runs"));
  for (std::string line; std::getline(log, line);) {
    std::istringstream in(line);
    int i = 0, pbs = 0, sge = 0;
    std::string what;
    long long t = 0;
    in >> i;
    if (line.find(" start ") != std::string::npos) {
      in >> pbs >> sge >> what >> t;
      CHECK(pbs == i);
      CHECK(sge == i);
      ++starts[i];
      edges.emplace_back(t, 1);
    } else {
      in >> what >> t;
      edges.emplace_back(t, -1);
    }
  }
  CHECK(starts == std::map<int, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}});
  std::sort(edges.begin(), edges.end());
  int at_once = 0, peak = 0;
  for (const auto& edge : edges) peak = std::max(peak, at_once += edge.second);
  CHECK(peak <= 2);
  for (int i = 1; i <= 5; ++i) CHECK(slurp(work + "/arr.o" + sid + "." + std::to_string(i)) == std::to_string(i) + "\n");

  // One task by name, and every task with -t.
  Result t3 = other.cli({"stat", sid + "[3]", "--json"});
  REQUIRE(t3.rc == 0);
  Json j3 = Json::parse(t3.out);
  CHECK(j3["array_id"] == id);
  CHECK(j3["array_index"] == 3);
  CHECK(j3["end_reason"] == "completed");
  Json j6 = Json::parse(f.cli({"stat", sid + "[6]", "--json"}).out);
  CHECK(j6["end_reason"] == "cancelled");
  CHECK(j6["runs"].empty());
  Json all = Json::parse(lead.cli({"stat", "-t", sid, "--json"}).out);
  CHECK(all.size() == 7);
  CHECK(f.cli({"stat", sid + "[7]"}).rc != 0);
  Json ok = wait_mesh_state(m, 0, if_ok, "ended");
  CHECK(ok["end_reason"] == "dependency_never_met");
  CHECK(ok["comment"] == "afterok:" + sid + " can never be met: job " + sid + " ended failed");
  CHECK(wait_mesh_state(m, 0, if_not, "ended")["end_reason"] == "completed");
}
