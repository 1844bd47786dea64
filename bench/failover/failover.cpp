// The mesh's failover, end to end: 3 voters as real corrald processes
// (`--emulate`: jobs are timers, no root) on 127.0.0.1 ports, jobs submitted
// and running, and `--trials` times a SIGKILL to the coordinator, which is
// restarted after each trial. Prints one JSON object.
//
// failover_ms of a trial: from the SIGKILL (this program's wall clock just
// before kill()) to the new coordinator's first decision, which is the start
// time the replicated log records for the first run decided after the kill
// (the coordinator stamps each JobStarted with its wall clock when it
// decides; `corral stat` shows it as the run's start). Same machine, same
// clock. A backlog of waiting jobs is kept, so there is always a decision to
// make once the new coordinator can make it.
// lost_jobs: acknowledged ids that are not in the final replicated state, or
// that never end. double_starts: jobs launched more often than the log holds
// runs of them (launches counted from every node's log, "job N started on
// cores", also across restarts), or completed twice. The killed node's jobs
// die with it (an emulated node's jobs are timers): its agent gives them back
// at its restart and the mesh requeues them (runs_requeued), which is no
// double start.
//
// Every member has its CURVE key pair (`corral keygen`) and one allowed file,
// as on a rack.
//
//   build/bench/failover/bench_failover [--corrald build/agent/corrald] [--corral build/tools/corral]
//                                       [--trials 20]
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/local_conn.hpp"
#include "proto/proto.hpp"
#include "tests/free_port.hpp"

using namespace corral;
using bench::Conn;

using corral_test::free_port;

namespace {

constexpr int kVoters = 3;

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Every corrald this program started, killed at exit whatever the path.
std::vector<pid_t> g_children;
void kill_children() {
  for (pid_t p : g_children)
    if (p > 0) ::kill(p, SIGKILL);
  for (pid_t p : g_children)
    if (p > 0) ::waitpid(p, nullptr, 0);
  g_children.clear();
}
void on_signal(int) {
  for (pid_t p : g_children)
    if (p > 0) ::kill(p, SIGKILL);
  _exit(3);
}

struct Node {
  std::string dir, sock, listen, name;
  pid_t pid = -1;
};

class Mesh {
 public:
  Mesh(std::string corrald, std::string dir, std::string emulate) : corrald_(std::move(corrald)), dir_(std::move(dir)) {
    std::string voters;
    for (int i = 0; i < kVoters; ++i) {
      Node n;
      n.name = "n" + std::to_string(i + 1);
      n.dir = dir_ + "/" + n.name;
      n.sock = n.dir + "/sock";
      n.listen = "127.0.0.1:" + std::to_string(free_port());
      std::filesystem::create_directories(n.dir);
      voters += (i ? "," : "") + n.listen;
      nodes.push_back(n);
    }
    voters_ = voters;
    emulate_ = std::move(emulate);
  }

  // Each member's CURVE key pair (`corral keygen`) and the one allowed file, as on a rack.
  void make_keys(const std::string& corral) {
    std::string allowed;
    for (const Node& n : nodes) {
      std::string cmd = "'" + corral + "' keygen --out '" + n.dir + "/keys' >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("corral keygen failed: " + cmd);
      std::ifstream in(n.dir + "/keys/mesh.key.pub");
      std::string pub;
      in >> pub;
      allowed += pub + " " + n.listen + "  # " + n.name + "\n";
    }
    std::ofstream(dir_ + "/allowed") << allowed;
  }
  ~Mesh() { kill_children(); }

  void start(int i) {
    Node& n = nodes[i];
    std::vector<std::string> args = {corrald_, "--no-config", "--foreground", "--emulate", emulate_,
                                     "--state-dir", n.dir + "/state", "--socket", n.sock, "--pub", "ipc://" + n.dir + "/events",
                                     "--node-state-dir", n.dir + "/node", "--jobfs-root", n.dir + "/jobfs",
                                     "--ckpt-root", n.dir + "/ckpt", "--log", n.dir + "/corrald.log",
                                     "--set", "mesh=bench", "--set", "voters=" + voters_, "--set", "node_name=" + n.name,
                                     "--set", "listen=" + n.listen, "--set", "mesh_key=" + n.dir + "/keys/mesh.key",
                                     "--set", "mesh_allowed_keys=" + dir_ + "/allowed"};
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<char*> av;
      for (auto& s : args) av.push_back(s.data());
      av.push_back(nullptr);
      ::execv(av[0], av.data());
      _exit(127);
    }
    n.pid = pid;
    g_children.push_back(pid);
  }

  void kill9(int i) {
    ::kill(nodes[i].pid, SIGKILL);
    ::waitpid(nodes[i].pid, nullptr, 0);
    std::replace(g_children.begin(), g_children.end(), nodes[i].pid, pid_t(-1));
    nodes[i].pid = -1;
  }

  template <class Rep>
  std::optional<Rep> ask(int i, const proto::Message& req) const {
    try {
      Conn c(nodes[i].sock);
      if (c.fd < 0) return std::nullopt;
      c.send(req);
      proto::Message m = c.recv();
      if (auto* r = std::get_if<Rep>(&m)) return *r;
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  std::optional<proto::MeshStatus> status(int i) const {
    auto r = ask<proto::MeshRep>(i, proto::MeshReq{false});
    if (!r) return std::nullopt;
    return r->mesh;
  }

  // The member every member in `up` names as coordinator, which says it leads; -1 after `ms`.
  int coordinator(const std::vector<int>& up, int ms) const {
    for (double end = now_s() + ms / 1000.0; now_s() < end; sleep_ms(20)) {
      std::string who;
      bool same = true;
      for (int i : up) {
        auto s = status(i);
        if (!s || s->coordinator.empty() || (!who.empty() && s->coordinator != who)) same = false;
        else who = s->coordinator;
      }
      if (!same) continue;
      for (int i : up)
        if (nodes[i].name == who && status(i)->state == "leader") return i;
    }
    return -1;
  }

  std::vector<Node> nodes;

 private:
  std::string corrald_, dir_, voters_, emulate_;
};

proto::JobSpec job_spec(const std::string& dir, int runtime_ms) {
  proto::JobSpec s;
  s.name = "fo";
  s.script = "#!/bin/sh\n#CORRAL_EMULATE runtime=" + std::to_string(runtime_ms) + "ms\n";
  s.script_name = "--wrap";
  s.cwd = dir;
  s.stdout_path = "/dev/null";
  s.stderr_path = "/dev/null";
  s.walltime = 60;
  s.ncpus = 1;
  return s;
}

// Jobs launched per id, from every node's log (appended across restarts).
std::map<std::uint64_t, int> launches(const Mesh& m) {
  std::map<std::uint64_t, int> out;
  std::regex started(R"(corrald: job (\d+) started on cores)");
  for (const Node& n : m.nodes) {
    std::ifstream in(n.dir + "/corrald.log");
    std::string line;
    std::smatch sm;
    while (std::getline(in, line))
      if (std::regex_search(line, sm, started)) ++out[std::stoull(sm[1])];
  }
  return out;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

// Submits `n` jobs on member `on`, pipelined; the acknowledged ids go to `acked`.
int submit(const Mesh& m, int on, int n, std::mt19937& rng, const std::string& dir, std::set<std::uint64_t>& acked) {
  Conn c(m.nodes[on].sock);
  if (c.fd < 0) return 0;
  std::uniform_int_distribution<int> runtime(300, 1500);
  for (int k = 0; k < n; ++k) c.send(proto::SubmitReq{job_spec(dir, runtime(rng))});
  int ok = 0;
  for (int k = 0; k < n; ++k) {
    proto::Message rep = c.recv();
    if (auto* r = std::get_if<proto::SubmitRep>(&rep)) {
      acked.insert(r->id);
      ++ok;
    }
  }
  return ok;
}

// The earliest run start at or after `since` in member i's replicated state; 0: none yet.
double first_start_since(const Mesh& m, int i, double since) {
  auto rep = m.ask<proto::StatRep>(i, proto::StatReq{});
  double first = 0;
  if (!rep) return 0;
  for (const auto& j : rep->jobs)
    for (const auto& r : j.runs)
      if (r.start >= since && (first == 0 || r.start < first)) first = r.start;
  return first;
}

std::vector<int> all_but(int k) {
  std::vector<int> v;
  for (int i = 0; i < kVoters; ++i)
    if (i != k) v.push_back(i);
  return v;
}

int run(const std::string& corrald, const std::string& corral, const std::string& dir, const std::string& emulate,
        int trials) {
  Mesh m(corrald, dir, emulate);
  m.make_keys(corral);
  for (int i = 0; i < kVoters; ++i) m.start(i);
  int l = m.coordinator(all_but(-1), 30000);
  if (l < 0) throw std::runtime_error("no coordinator elected within 30 s (logs in " + dir + ")");
  std::mt19937 rng(1);
  std::set<std::uint64_t> acked;
  std::vector<double> ms;
  int timeouts = 0;
  for (int t = 0; t < trials; ++t) {
    submit(m, static_cast<int>(rng() % kVoters), 30, rng, dir, acked);
    sleep_ms(1000 + static_cast<int>(rng() % 500));
    double t_kill = now_s();
    m.kill9(l);
    std::vector<int> up = all_but(l);
    int nl = m.coordinator(up, 15000);
    double first = 0;
    for (double end = now_s() + 15; nl >= 0 && first == 0 && now_s() < end; sleep_ms(50))
      first = first_start_since(m, nl, t_kill);
    if (first == 0) ++timeouts;
    else ms.push_back((first - t_kill) * 1000);
    m.start(l);
    l = m.coordinator(all_but(-1), 30000);
    if (l < 0) throw std::runtime_error("trial " + std::to_string(t + 1) + ": no coordinator after the restart");
  }
  // Every acknowledged job ends, once.
  std::map<std::uint64_t, proto::JobInfo> final;
  for (double end = now_s() + 120; now_s() < end; sleep_ms(200)) {
    auto rep = m.ask<proto::StatRep>(l, proto::StatReq{});
    if (!rep) continue;
    final.clear();
    for (auto& j : rep->jobs) final[j.id] = j;
    bool done = true;
    for (auto id : acked)
      if (!final.count(id) || final[id].state != proto::state::kEnded) done = false;
    if (done) break;
  }
  int lost = 0, not_completed = 0, doubled = 0, requeued = 0;
  for (auto id : acked) {
    auto it = final.find(id);
    if (it == final.end() || it->second.state != proto::state::kEnded) ++lost;
    else if (it->second.end_reason != "completed") ++not_completed;
  }
  // Doubled: launched more often than the log has runs of it, or completed twice. A run that
  // went down with the killed node is given back and requeued: its next run is no double.
  std::map<std::uint64_t, int> launched = launches(m);
  for (const auto& [id, j] : final) {
    int completed = 0;
    for (const auto& r : j.runs) {
      completed += r.end_reason == "completed";
      requeued += r.end_reason == "preempted";
    }
    doubled += launched[id] > static_cast<int>(j.runs.size()) || completed > 1;
  }
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  std::printf("{\"bench\":\"failover\",\"voters\":%d,\"emulate\":\"%s\",\"trials\":%d,\"p50_ms\":%.0f,\"max_ms\":%.0f,"
              "\"timeouts\":%d,\"lost_jobs\":%d,\"double_starts\":%d,\"jobs\":%zu,\"not_completed\":%d,\"runs_requeued\":%d,"
              "\"loadavg_1m\":%.2f,\"failover_ms\":[",
              kVoters, emulate.c_str(), trials, quantile(ms, 0.5), ms.empty() ? -1.0 : *std::max_element(ms.begin(), ms.end()),
              timeouts, lost, doubled, acked.size(), not_completed, requeued, load);
  for (std::size_t k = 0; k < ms.size(); ++k) std::printf("%s%.0f", k ? "," : "", ms[k]);
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string corrald = "build/agent/corrald", corral = "build/tools/corral", emulate = "cores=4";
  int trials = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--corrald") corrald = argv[i + 1];
    else if (a == "--corral") corral = argv[i + 1];
    else if (a == "--trials") trials = std::atoi(argv[i + 1]);
    else if (a == "--emulate") emulate = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_failover: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  for (int s : {SIGINT, SIGTERM, SIGHUP}) std::signal(s, on_signal);
  char tmpl[] = "/tmp/corral-failover-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  int rc = 0;
  try {
    rc = run(corrald, corral, dir, emulate, trials);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_failover: %s\n", e.what());
    rc = 1;
  }
  kill_children();
  std::filesystem::remove_all(dir);
  return rc;
}
