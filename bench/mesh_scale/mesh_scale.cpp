// A big mesh's coordinator in one process: `mesh_scale [--nodes 1000]
// [--cores 64] [--jobs 100000] [--steady-s 10] [--policy easy] [--seed 1]`.
//
// Three real libraft voters on loopback ZeroMQ (LoopbackMesh), each with the
// CoordinatorLoop corrald runs, and `--nodes` emulated nodes whose agents
// share this process: each reports its node every second (as a hello does),
// takes the starts pushed to it, acknowledges them, and ends each job after
// the run time it states, proposing the end to the leader (as an agent
// forwards it). The starts and acknowledgements go through function calls,
// not sockets; raft's traffic goes through ZeroMQ.
//
// Phases: submit `--jobs` jobs (each a JobAccepted entry, committed by a
// majority), run `--steady-s` seconds, kill the leader (raft and sockets
// closed at once), time until the new coordinator's first pass, run 5 s
// more. Prints one JSON object; exits 1 when a job was lost or
// ran on two nodes at once.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/mesh_procs.hpp"
#include "coordinator/names.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "coordinator/service/loopback_mesh.hpp"

using namespace corral;
using namespace corral::service;
namespace mesh = corral::proto::mesh;
namespace jobs = corral::proto::jobs;

namespace {

struct Options {
  int nodes = 1000, cores = 64, jobs = 100000, steady_s = 10;
  std::uint64_t seed = 1;
  Policy policy = Policy::Easy;
};

constexpr std::uint64_t kFirstNodeMember = 1000;  // emulated nodes' member ids from here
constexpr std::size_t kWindow = 2000;             // submissions in flight

double rss_mb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::string(field).size()) / 1024.0;
  return -1;
}

struct EmuNode {
  std::string name;
  std::uint64_t member = 0;
  std::map<std::uint64_t, std::int32_t> running;  // job -> run
  std::set<std::pair<std::uint64_t, std::int32_t>> taken;  // every (job, run) it started: its journal
};

class Scale {
 public:
  explicit Scale(const Options& o) : o_(o), rng_(o.seed) {
    for (int i = 0; i < o.nodes; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "e%04d", i + 1);
      nodes_.push_back(EmuNode{name, kFirstNodeMember + static_cast<std::uint64_t>(i), {}, {}});
    }
    apply_policy(o.policy, sched_);
    coords_.resize(m_.members.size());
    for (unsigned i = 0; i < m_.members.size(); ++i) {
      Replica& r = m_.members[i];
      coords_[i] = std::make_unique<CoordinatorLoop>(
          *m_.envs[i], *r.node, r.fsm->state(), "scale", sched_, std::vector<Queue>{},
          [this, i](std::uint64_t to, const jobs::Message& msg) { push(i, to, msg); });
      coords_[i]->watch_passes([this](double ms, double cpu_ms, std::size_t pending, std::size_t starts) {
        passes_.push_back({ms, cpu_ms, pending, starts});
        if (killed_ms_ != 0 && first_pass_ms_ == 0) first_pass_ms_ = m_.loop.now_ms();
      });
      r.node->on_leadership([this, i](bool l, std::uint64_t t) {
        if (coords_[i]) coords_[i]->leadership(l, t);
      });
    }
    report();
  }

  int run() {
    std::uint64_t t0 = m_.loop.now_ms();
    if (!m_.loop.run_until([&] { return m_.leader() >= 0; }, 10000)) return fail("no leader elected");
    submit_all();
    if (!m_.loop.run_until([&] { return committed_ == static_cast<std::size_t>(o_.jobs); }, 600000))
      return fail("submissions not all committed");
    double submit_s = static_cast<double>(m_.loop.now_ms() - t0) / 1000.0;
    std::size_t steady_from = passes_.size();
    m_.loop.run_until([] { return false; }, static_cast<std::uint64_t>(o_.steady_s) * 1000);
    std::vector<double> steady, steady_cpu;
    for (std::size_t k = steady_from; k < passes_.size(); ++k) {
      steady.push_back(passes_[k].ms);
      steady_cpu.push_back(passes_[k].cpu_ms);
    }
    double rss = rss_mb("VmRSS:");
    double failover = failover_ms();
    m_.loop.run_until([] { return false; }, 5000);
    return print(submit_s, steady, steady_cpu, rss, failover);
  }

 private:
  struct Pass {
    double ms, cpu_ms;
    std::size_t pending, starts;
  };

  int fail(const std::string& why) {
    std::fprintf(stderr, "bench_mesh_scale: %s\n", why.c_str());
    return 1;
  }

  // One core to 16; one job in ten ends within a minute, the others run
  // 10 to 30 minutes: the cluster fills and the queue stays long, while ends
  // keep the passes coming.
  mesh::JobAccepted job(int k) {
    static constexpr int kCpus[] = {1, 1, 1, 2, 2, 4, 8, 16};
    std::uniform_int_distribution<int> pick(0, 7), tenth(0, 9), shorter(5, 60), longer(600, 1800);
    int run = tenth(rng_) == 0 ? shorter(rng_) : longer(rng_);
    mesh::JobAccepted a;
    a.spec = corral::testing::quiet_job("t" + std::to_string(run * 1000), "#!/bin/sh\n", "/tmp");
    a.spec.ncpus = kCpus[pick(rng_)];
    a.spec.walltime = 2 * run;
    a.user = "u" + std::to_string(k % 50);
    a.uid = 10000 + static_cast<std::uint32_t>(k % 50);
    a.gid = 10000;
    a.submit_time = m_.envs[0] ? m_.envs[0]->wall_s() : 0;
    a.token = "scale-" + std::to_string(k);
    return a;
  }

  // Keeps kWindow submissions in flight until every job is committed.
  void submit_all() {
    submitted_at_.assign(static_cast<std::size_t>(o_.jobs) + 1, 0);
    for (std::size_t k = 0; k < kWindow && next_ < o_.jobs; ++k) submit(next_++);
  }
  void submit(int k) {
    int l = m_.leader();
    if (l < 0) {
      m_.loop.at(100, [this, k] { submit(k); });
      return;
    }
    std::uint64_t sent = m_.loop.now_ms();
    m_.members[l].node->propose(mesh::encode_entry(job(k)), [this, k, sent](const Proposed& p) {
      if (p.status != Status::ok || !p.applied.ok) {
        m_.loop.at(100, [this, k] { submit(k); });
        return;
      }
      if (p.applied.value < submitted_at_.size()) submitted_at_[p.applied.value] = sent;
      ++committed_;
      if (next_ < o_.jobs) submit(next_++);
    });
  }

  // Every live coordinator hears every node each second.
  void report() {
    std::uint64_t now = m_.loop.now_ms();
    for (auto& c : coords_) {
      if (!c) continue;
      for (const EmuNode& n : nodes_) {
        NodeReport r{n.member, n.name, o_.cores, 0, 0, {}, now};
        for (const auto& [job, run] : n.running) r.running.push_back(job);
        c->node(r);
      }
    }
    m_.loop.at(1000, [this] { report(); });
  }

  void push(unsigned from, std::uint64_t to, const jobs::Message& msg) {
    const auto* s = std::get_if<jobs::StartJob>(&msg);
    if (!s || to < kFirstNodeMember || to - kFirstNodeMember >= nodes_.size()) return;
    m_.loop.at(0, [this, from, node = to - kFirstNodeMember, s = *s] { start(from, node, s); });
  }

  // An emulated agent's rules: a (job, run) starts once; its end goes to the leader.
  void start(unsigned from, std::size_t node, const jobs::StartJob& s) {
    EmuNode& n = nodes_[node];
    if (n.taken.insert({s.job, s.run}).second) {
      n.running.emplace(s.job, s.run);
      if (++live_runs_[s.job] > 1) ++double_starts_;
      if (s.job < submitted_at_.size() && started_at_.emplace(s.job, m_.loop.now_ms()).second)
        to_start_ms_.push_back(static_cast<double>(m_.loop.now_ms() - submitted_at_[s.job]));
      m_.loop.at(std::stoull(s.spec.spec.name.substr(1)), [this, node, job = s.job, run = s.run] {
        nodes_[node].running.erase(job);
        --live_runs_[job];
        end(job, run);
      });
    }
    if (coords_[from]) coords_[from]->on_ack(jobs::StartAck{"scale", n.member, s.term, s.decision, s.job, s.run, "started", ""});
  }

  void end(std::uint64_t job, std::int32_t run) {
    int l = m_.leader();
    if (l < 0) {
      m_.loop.at(100, [this, job, run] { end(job, run); });
      return;
    }
    mesh::JobEnded e{job, run, "completed", 0, m_.envs[l]->wall_s()};
    m_.members[l].node->propose(mesh::encode_entry(e), [this, job, run](const Proposed& p) {
      if (p.status != Status::ok) m_.loop.at(100, [this, job, run] { end(job, run); });
      else if (p.applied.ok) ++ended_;
    });
  }

  // Kill -9 of the leader: until a new coordinator has run its first pass
  // (its barrier committed, the inherited starts sent again, schedule() run
  // over the whole state and its starts proposed). Whether that pass starts
  // anything depends on free cores, not on the failover.
  double failover_ms() {
    int l = m_.leader();
    if (l < 0) return -1;
    coords_[l].reset();
    killed_ms_ = m_.loop.now_ms();
    m_.kill(static_cast<unsigned>(l));
    if (!m_.loop.run_until([&] { return first_pass_ms_ != 0; }, 30000)) return -1;
    return static_cast<double>(first_pass_ms_ - killed_ms_);
  }

  int print(double submit_s, const std::vector<double>& steady, const std::vector<double>& steady_cpu, double rss,
            double failover) {
    int l = m_.leader();
    std::size_t lost = 0;
    if (l >= 0)
      for (std::uint64_t id = 1; id <= static_cast<std::uint64_t>(o_.jobs); ++id)
        if (!m_.members[l].fsm->state().job(id)) ++lost;
    double max_pass = steady.empty() ? -1 : *std::max_element(steady.begin(), steady.end());
    std::printf(
        "{\"bench\":\"mesh_scale\",\"nodes\":%d,\"cores_per_node\":%d,\"jobs\":%d,\"policy\":\"%s\","
        "\"submit_per_s\":%.0f,\"pass_ms\":%.1f,\"pass_cpu_ms\":%.1f,\"pass_max_ms\":%.1f,\"steady_passes\":%zu,"
        "\"submit_to_start_p50_ms\":%.0f,\"started\":%zu,\"ended\":%zu,\"coordinator_rss_mb\":%.0f,"
        "\"peak_rss_mb\":%.0f,\"failover_ms\":%.0f,\"lost_jobs\":%zu,\"double_starts\":%zu,"
        "\"leader_after\":%s}\n",
        o_.nodes, o_.cores, o_.jobs, std::string(name(o_.policy)).c_str(),
        static_cast<double>(o_.jobs) / submit_s, bench::quantile(steady, 0.5), bench::quantile(steady_cpu, 0.5), max_pass,
        steady.size(),
        bench::quantile(to_start_ms_, 0.5), started_at_.size(), ended_, rss, rss_mb("VmHWM:"), failover, lost,
        double_starts_, l >= 0 ? "true" : "false");
    return l < 0 || lost || double_starts_ || failover < 0 ? 1 : 0;
  }

  Options o_;
  std::mt19937_64 rng_;
  SchedConfig sched_;
  LoopbackMesh m_{3};
  std::vector<std::unique_ptr<CoordinatorLoop>> coords_;  // after m_: gone before their members
  std::vector<EmuNode> nodes_;
  std::vector<Pass> passes_;
  std::vector<std::uint64_t> submitted_at_;  // by job id: when its submission was sent
  std::map<std::uint64_t, std::uint64_t> started_at_;
  std::map<std::uint64_t, int> live_runs_;
  std::vector<double> to_start_ms_;
  int next_ = 0;
  std::size_t committed_ = 0, ended_ = 0, double_starts_ = 0;
  std::uint64_t killed_ms_ = 0, first_pass_ms_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto set = [&o](const std::string& a, const std::string& v) {
    if (a == "--nodes") o.nodes = std::atoi(v.c_str());
    else if (a == "--cores") o.cores = std::atoi(v.c_str());
    else if (a == "--jobs") o.jobs = std::atoi(v.c_str());
    else if (a == "--steady-s") o.steady_s = std::atoi(v.c_str());
    else if (a == "--seed") o.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--policy") o.policy = parse_name<Policy>(v);
    else return false;
    return true;
  };
  try {
    if (!bench::parse_options("bench_mesh_scale", argc, argv, set)) return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bench_mesh_scale: %s\n", e.what());
    return 2;
  }
  if (o.nodes < 1 || o.cores < 1 || o.jobs < 1 || o.steady_s < 0) {
    std::fprintf(stderr, "bench_mesh_scale: --nodes, --cores and --jobs at least 1, --steady-s at least 0\n");
    return 2;
  }
  Scale s(o);
  return s.run();
}
