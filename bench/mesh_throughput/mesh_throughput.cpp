// The mesh's job throughput, end to end: voters as real corrald processes
// (`--emulate`: jobs are timers, no root) on 127.0.0.1 ports, with CURVE, and a
// burst of jobs that exit at once, submitted through every member's local
// socket by many clients at the same time (a member serves one mesh request
// per connection at a time, as many `corral submit` processes would). Every
// submit is answered only once a majority of the voters holds the job. Prints
// one JSON object.
//
// jobs_per_s: jobs / (the last run's end - the first submit sent).
// submit_per_s: jobs / (the last submit answered - the first submit sent).
// start_p50_ms, start_p99_ms: from a job's submit answer (this program's wall
// clock) to its launch on its node (the node's log line, to the millisecond).
// Same machine, same clock. The coordinator may decide the start before the
// answer has travelled back to the client: such a start counts as negative.
// decide_p50_ms: from the answer to the coordinator's decision (the run's
// start in the replicated log, stamped when it decided).
// lost: acknowledged ids not completed in the final state within the timeout.
// doubled: jobs launched (every node's log) more often than the log holds runs
// of them, or completed more than once.
//
//   build/bench/mesh_throughput/bench_mesh_throughput [--corrald build/agent/corrald]
//       [--corral build/tools/corral] [--jobs 5000] [--voters 5] [--members 0] [--clients 16]
//       [--emulate cores=64] [--fsync yes]
#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
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

struct Options {
  std::string corrald = "build/agent/corrald", corral = "build/tools/corral", emulate = "cores=64", fsync = "yes";
  int jobs = 5000, voters = 5, members = 0, clients = 16;  // members: agents that do not vote
};

struct Submitted {
  double sent = 0, acked = 0;
  std::uint64_t id = 0;
};

struct Burst {
  std::vector<Submitted> jobs;
  int refused = 0;
  std::string first_error;
};

// `o.clients` connections on each member, each with one submit in flight, until `o.jobs`
// are answered.
Burst submit_burst(const MeshProcs& m, const Options& o, const std::string& dir) {
  Burst b;
  b.jobs.resize(static_cast<std::size_t>(o.jobs));
  std::vector<std::unique_ptr<Conn>> conns;
  for (int c = 0; c < o.clients * m.size(); ++c) {
    conns.push_back(std::make_unique<Conn>(m.nodes[static_cast<std::size_t>(c % m.size())].sock));
    if (conns.back()->fd < 0) throw std::runtime_error("cannot connect to " + m.nodes[c % m.size()].sock);
  }
  const proto::SubmitReq req{bench::emulated_job("burst", dir, 0)};
  std::vector<int> on(conns.size(), -1);  // the job each connection waits for
  int next = 0, answered = 0;
  auto send_next = [&](std::size_t c) {
    if (next >= o.jobs) return;
    b.jobs[static_cast<std::size_t>(next)].sent = wall_s();
    on[c] = next++;
    conns[c]->send(req);
  };
  for (std::size_t c = 0; c < conns.size(); ++c) send_next(c);
  std::vector<pollfd> fds(conns.size());
  while (answered < next) {
    for (std::size_t c = 0; c < conns.size(); ++c) fds[c] = pollfd{conns[c]->fd, on[c] >= 0 ? short(POLLIN) : short(0), 0};
    if (::poll(fds.data(), fds.size(), 60000) <= 0) throw std::runtime_error("no submit answered within 60 s");
    for (std::size_t c = 0; c < conns.size(); ++c) {
      if (on[c] < 0 || !(fds[c].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Submitted& s = b.jobs[static_cast<std::size_t>(on[c])];
      ++answered;
      on[c] = -1;
      proto::Message rep;
      try {
        rep = conns[c]->recv();
      } catch (const std::exception& e) {  // this connection is done; the others go on
        ++b.refused;
        if (b.first_error.empty()) b.first_error = e.what();
        continue;
      }
      s.acked = wall_s();
      if (auto* r = std::get_if<proto::SubmitRep>(&rep)) {
        s.id = r->id;
      } else {
        ++b.refused;
        if (auto* e = std::get_if<proto::ErrorRep>(&rep); e && b.first_error.empty()) b.first_error = e->message;
      }
      send_next(c);
    }
  }
  b.refused += o.jobs - next;  // never sent: every connection was closed
  return b;
}

// The replicated jobs as member i applied them, by id, once every acknowledged one ended
// (or after `timeout_s`).
std::map<std::uint64_t, proto::JobInfo> wait_ended(const MeshProcs& m, int i, const std::set<std::uint64_t>& acked,
                                                   double timeout_s) {
  std::map<std::uint64_t, proto::JobInfo> all;
  for (double end = wall_s() + timeout_s; wall_s() < end; sleep_ms(1000)) {
    auto rep = m.ask<proto::StatRep>(i, proto::StatReq{});
    if (!rep) continue;
    all.clear();
    for (auto& j : rep->jobs) all[j.id] = std::move(j);
    bool done = true;
    for (auto id : acked)
      if (!all.count(id) || all[id].state != proto::state::kEnded) done = false;
    if (done) break;
  }
  return all;
}

int run(const Options& o, const std::string& dir) {
  MeshProcs m(o.corrald, dir, o.voters, o.emulate, {"--set", "fsync=" + o.fsync}, o.members);
  m.make_keys(o.corral);
  m.start_all();
  int l = m.coordinator(m.all_but(-1), 30000);
  if (l < 0) throw std::runtime_error("no coordinator elected within 30 s (logs in " + dir + ")");
  // Every node has reported to the coordinator (the members admitted): its cores are there.
  for (double end = wall_s() + 20; wall_s() < end; sleep_ms(50)) {
    auto r = m.ask<proto::NodesRep>(l, proto::NodesReq{});
    if (r && static_cast<int>(std::count_if(r->nodes.begin(), r->nodes.end(), [](const proto::NodeLine& n) {
               return n.state == "up";
             })) >= m.size())
      break;
  }

  Burst b = submit_burst(m, o, dir);
  std::set<std::uint64_t> acked;
  for (const auto& s : b.jobs)
    if (s.id) acked.insert(s.id);
  const int follower = (l + 1) % m.size();  // the stat polls burden a follower, not the coordinator
  std::map<std::uint64_t, proto::JobInfo> final = wait_ended(m, follower, acked, 120);

  double first_sent = b.jobs.front().sent, last_ack = 0, last_end = 0;
  for (const auto& s : b.jobs) last_ack = std::max(last_ack, s.acked);
  std::map<std::uint64_t, std::vector<double>> launched = m.launches();
  std::vector<double> start_ms, decide_ms;
  int lost = 0, doubled = 0, completed_jobs = 0;
  for (const auto& s : b.jobs) {
    if (!s.id) continue;
    auto it = final.find(s.id);
    if (it == final.end() || it->second.state != proto::state::kEnded || it->second.runs.empty() ||
        it->second.end_reason != "completed") {
      ++lost;
      continue;
    }
    ++completed_jobs;
    decide_ms.push_back((it->second.runs.front().start - s.acked) * 1000);
    if (auto l = launched.find(s.id); l != launched.end()) start_ms.push_back((l->second.front() - s.acked) * 1000);
    last_end = std::max(last_end, it->second.runs.back().end);
  }
  for (const auto& [id, j] : final) {
    int completed = 0;
    for (const auto& r : j.runs) completed += r.end_reason == "completed";
    doubled += launched[id].size() > j.runs.size() || completed > 1;
  }
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  std::printf("{\"bench\":\"mesh_throughput\",\"voters\":%d,\"members\":%d,\"emulate\":\"%s\",\"fsync\":\"%s\",\"clients\":%d,"
              "\"jobs\":%d,\"acknowledged\":%zu,\"refused\":%d,\"completed\":%d,"
              "\"jobs_per_s\":%.1f,\"submit_per_s\":%.1f,\"start_p50_ms\":%.1f,\"start_p99_ms\":%.1f,\"decide_p50_ms\":%.1f,"
              "\"burst_s\":%.2f,\"lost\":%d,\"doubled\":%d,\"loadavg_1m\":%.2f%s%s%s}\n",
              o.voters, o.members, o.emulate.c_str(), o.fsync.c_str(), o.clients * m.size(), o.jobs, acked.size(), b.refused,
              completed_jobs, last_end > first_sent ? completed_jobs / (last_end - first_sent) : 0.0,
              last_ack > first_sent ? static_cast<double>(acked.size()) / (last_ack - first_sent) : 0.0,
              quantile(start_ms, 0.5), quantile(start_ms, 0.99), quantile(decide_ms, 0.5), last_end - first_sent, lost, doubled, load,
              b.first_error.empty() ? "" : ",\"first_error\":\"", b.first_error.c_str(),
              b.first_error.empty() ? "" : "\"");
  return lost || doubled || b.refused ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  auto set = [&o](const std::string& a, const std::string& v) {
    if (a == "--corrald") o.corrald = v;
    else if (a == "--corral") o.corral = v;
    else if (a == "--jobs") o.jobs = std::atoi(v.c_str());
    else if (a == "--voters") o.voters = std::atoi(v.c_str());
    else if (a == "--members") o.members = std::atoi(v.c_str());
    else if (a == "--clients") o.clients = std::atoi(v.c_str());
    else if (a == "--emulate") o.emulate = v;
    else if (a == "--fsync") o.fsync = v;
    else return false;
    return true;
  };
  if (!bench::parse_options("bench_mesh_throughput", argc, argv, set)) return 2;
  if (o.jobs < 1 || o.clients < 1 || (o.voters != 3 && o.voters != 5) || o.members < 0 || o.members > 64) {
    std::fprintf(stderr, "bench_mesh_throughput: --jobs and --clients at least 1, --voters 3 or 5, --members 0 to 64\n");
    return 2;
  }
  return bench::run_in_temp_dir("bench_mesh_throughput", [&o](const std::string& dir) { return run(o, dir); });
}
