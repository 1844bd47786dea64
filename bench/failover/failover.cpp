// The mesh's failover, end to end: 3 voters as real corrald processes
// (`--emulate`: jobs are timers, no root) on 127.0.0.1 ports, jobs submitted
// and running, and `--trials` times a SIGKILL to the coordinator, which is
// restarted after each trial. With --handover, each trial asks the
// coordinator to hand its role over instead (`corral mesh handover`, as root
// or an operator: run the bench as one): nothing is killed. With --sigterm,
// the coordinator's corrald is stopped as `systemctl stop` does (it hands its
// role over, then exits) and restarted. Prints one JSON object.
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
//                                       [--trials 20] [--handover | --sigterm]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/mesh_procs.hpp"

using namespace corral;
using bench::Conn;
using bench::MeshProcs;
using bench::quantile;
using bench::sleep_ms;
using bench::wall_s;

namespace {

constexpr int kVoters = 3;

// Submits `n` jobs on member `on`, pipelined; the acknowledged ids go to `acked`.
int submit(const MeshProcs& m, int on, int n, std::mt19937& rng, const std::string& dir, std::set<std::uint64_t>& acked) {
  Conn c(m.nodes[on].sock);
  if (c.fd < 0) return 0;
  std::uniform_int_distribution<int> runtime(300, 1500);
  for (int k = 0; k < n; ++k) c.send(proto::SubmitReq{bench::emulated_job("fo", dir, runtime(rng))});
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
double first_start_since(const MeshProcs& m, int i, double since) {
  auto rep = m.ask<proto::StatRep>(i, proto::StatReq{});
  double first = 0;
  if (!rep) return 0;
  for (const auto& j : rep->jobs)
    for (const auto& r : j.runs)
      if (r.start >= since && (first == 0 || r.start < first)) first = r.start;
  return first;
}

// Asks member l's corrald to hand the coordinator's role over (to the voter most up to
// date); "" when done, else why not.
std::string hand_over(const MeshProcs& m, int l) {
  try {
    Conn c(m.nodes[l].sock);
    if (c.fd < 0) return "cannot reach " + m.nodes[l].sock;
    c.send(proto::NodeAdminReq{"", std::string(proto::node_action::kHandover), ""});
    proto::Message r = c.recv();
    if (auto* e = std::get_if<proto::ErrorRep>(&r)) return e->message;
    return std::holds_alternative<proto::NodeAdminRep>(r) ? "" : "unexpected reply";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// The coordinator the members agree on once it is another than `old`; -1 after `ms`.
int next_coordinator(const MeshProcs& m, int old, int ms) {
  for (double end = wall_s() + ms / 1000.0; wall_s() < end; sleep_ms(20))
    if (int nl = m.coordinator(m.all_but(-1), 1000); nl >= 0 && nl != old) return nl;
  return -1;
}

enum class Mode { sigkill, handover, sigterm };
const char* mode_name(Mode m) { return m == Mode::sigkill ? "sigkill" : m == Mode::handover ? "handover" : "sigterm"; }

int run(const std::string& corrald, const std::string& corral, const std::string& dir, const std::string& emulate,
        int trials, Mode mode) {
  MeshProcs m(corrald, dir, kVoters, emulate);
  m.make_keys(corral);
  m.start_all();
  int l = m.coordinator(m.all_but(-1), 30000);
  if (l < 0) throw std::runtime_error("no coordinator elected within 30 s (logs in " + dir + ")");
  std::mt19937 rng(1);
  std::set<std::uint64_t> acked;
  std::vector<double> ms;
  int timeouts = 0;
  for (int t = 0; t < trials; ++t) {
    submit(m, static_cast<int>(rng() % kVoters), 30, rng, dir, acked);
    sleep_ms(1000 + static_cast<int>(rng() % 500));
    double t_kill = wall_s();
    int nl = -1;
    if (mode == Mode::handover) {
      if (std::string why = hand_over(m, l); !why.empty())
        throw std::runtime_error("trial " + std::to_string(t + 1) + ": handover refused: " + why);
      nl = next_coordinator(m, l, 15000);
    } else {
      m.stop(l, mode == Mode::sigterm ? SIGTERM : SIGKILL);
      nl = m.coordinator(m.all_but(l), 15000);
    }
    double first = 0;
    for (double end = wall_s() + 15; nl >= 0 && first == 0 && wall_s() < end; sleep_ms(50))
      first = first_start_since(m, nl, t_kill);
    if (first == 0) ++timeouts;
    else ms.push_back((first - t_kill) * 1000);
    if (mode != Mode::handover) m.start(l);
    l = m.coordinator(m.all_but(-1), 30000);
    if (l < 0) throw std::runtime_error("trial " + std::to_string(t + 1) + ": no coordinator after the restart");
  }
  // Every acknowledged job ends, once.
  std::map<std::uint64_t, proto::JobInfo> final;
  for (double end = wall_s() + 120; wall_s() < end; sleep_ms(200)) {
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
  std::map<std::uint64_t, std::vector<double>> launched = m.launches();
  for (const auto& [id, j] : final) {
    int completed = 0;
    for (const auto& r : j.runs) {
      completed += r.end_reason == "completed";
      requeued += r.end_reason == "preempted";
    }
    doubled += launched[id].size() > j.runs.size() || completed > 1;
  }
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  std::printf("{\"bench\":\"failover\",\"mode\":\"%s\",\"voters\":%d,\"emulate\":\"%s\",\"trials\":%d,\"p50_ms\":%.0f,\"max_ms\":%.0f,"
              "\"timeouts\":%d,\"lost_jobs\":%d,\"double_starts\":%d,\"jobs\":%zu,\"not_completed\":%d,\"runs_requeued\":%d,"
              "\"loadavg_1m\":%.2f,\"failover_ms\":[",
              mode_name(mode), kVoters, emulate.c_str(), trials, quantile(ms, 0.5), ms.empty() ? -1.0 : *std::max_element(ms.begin(), ms.end()),
              timeouts, lost, doubled, acked.size(), not_completed, requeued, load);
  for (std::size_t k = 0; k < ms.size(); ++k) std::printf("%s%.0f", k ? "," : "", ms[k]);
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string corrald = "build/agent/corrald", corral = "build/tools/corral", emulate = "cores=4";
  int trials = 20;
  Mode mode = Mode::sigkill;
  for (int i = 1; i < argc;)  // flags: taken out before the NAME VALUE options
    if (std::string a = argv[i]; a == "--handover" || a == "--sigterm") {
      if (mode != Mode::sigkill) {
        std::fprintf(stderr, "bench_failover: one of --handover and --sigterm, once\n");
        return 2;
      }
      mode = a == "--handover" ? Mode::handover : Mode::sigterm;
      for (int k = i; k + 1 < argc; ++k) argv[k] = argv[k + 1];
      --argc;
    } else {
      ++i;
    }
  auto set = [&](const std::string& a, const std::string& v) {
    if (a == "--corrald") corrald = v;
    else if (a == "--corral") corral = v;
    else if (a == "--trials") trials = std::atoi(v.c_str());
    else if (a == "--emulate") emulate = v;
    else return false;
    return true;
  };
  if (!bench::parse_options("bench_failover", argc, argv, set)) return 2;
  if (trials < 1) {
    std::fprintf(stderr, "bench_failover: --trials at least 1\n");
    return 2;
  }
  return bench::run_in_temp_dir("bench_failover", [&](const std::string& dir) {
    return run(corrald, corral, dir, emulate, trials, mode);
  });
}
