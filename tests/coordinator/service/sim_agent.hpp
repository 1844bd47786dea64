// A node's agent in the deterministic mesh simulation: the rules of
// agent/mesh_jobs.cpp (Daemon::mesh_start, mesh_ended) on a node whose jobs
// are timers. Its journal (which (job, run) it took, and how each ended)
// survives a crash of the agent, as corrald's does; what the agent holds in
// memory (the newest term it saw) does not. A job keeps running while its
// agent is down (its process is not the agent's) and the agent finds its end
// when it comes back, as corrald's recovery does.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "proto/mesh_jobs.hpp"

namespace corral_test {

namespace jobs = corral::proto::jobs;
namespace mesh = corral::proto::mesh;

// What the world sees an agent do, for the invariants.
struct AgentWatch {
  // A run is launched (its process starts) / its process ends.
  std::function<void(const std::string& node, const jobs::StartJob& s)> launched;
  std::function<void(const std::string& node, std::uint64_t job, std::int32_t run)> exited;
  std::function<void(const std::string& node, std::uint64_t job, std::int32_t run)> killed;
};

class SimAgent {
 public:
  struct Record {
    std::int32_t run = 0;        // the run it holds (requeues + 1)
    std::uint64_t end_ms = 0;    // when its process exits (virtual time)
    bool ended = false;
    int cores = 0;
    bool not_started = false;  // given back (did not fit, or lost with the agent): a requeue was asked
    bool share = false;        // of a job across nodes whose script runs elsewhere: held until stopped
    bool cancelled = false;    // stopped by the coordinator: its end is "cancelled"
  };
  // How the agent reaches the mesh while it is up: propose an entry (sent
  // until committed), acknowledge a start, run `fn` after `ms`.
  struct Up {
    std::function<void(mesh::Entry)> propose;
    std::function<void(std::uint64_t to, jobs::StartAck)> ack;
    std::function<void(std::uint64_t ms, std::function<void()>)> after;
    std::function<std::uint64_t()> now_ms;
    std::function<double()> wall_s;
  };

  SimAgent(std::string name, int cores, AgentWatch& watch) : name_(std::move(name)), cores_(cores), watch_(watch) {}

  // The agent (re)starts: runs that exited while it was down end now, the
  // others are watched again (corrald's recover()).
  void up(Up u) {
    up_ = std::move(u);
    term_ = 0;
    ++incarnation_;
    for (auto& [job, r] : journal_) {
      if (r.ended) continue;
      if (!lost_) {
        if (!r.share) watch_end(job);
        continue;
      }
      // Daemon::recover() in a mesh: a run whose processes are gone is given back (a share only
      // ends here: its job's run goes on on its first node).
      r.ended = true;
      if (r.share) continue;
      r.not_started = true;
      propose_requeue(job, r.run);
    }
    lost_ = false;
  }
  // The agent stops; with `lose_runs` its jobs' processes go with it (an
  // emulated node, a reboot), and are killed now.
  void down(bool lose_runs) {
    up_.propose = nullptr;
    lost_ = lose_runs;
    if (lose_runs)
      for (auto& [job, r] : journal_)
        if (!r.ended && !r.share) watch_.killed(name_, job, r.run);
  }
  bool is_up() const { return up_.propose != nullptr; }

  // Daemon::mesh_start.
  void start(const jobs::StartJob& s) {
    jobs::StartAck ack{s.mesh, 0, s.term, s.decision, s.job, s.run, "", ""};
    if (s.term < term_) return answer(s.from, ack, "refused");
    term_ = s.term;
    auto had = journal_.find(s.job);
    if (had != journal_.end() && had->second.run >= s.run) {
      if (had->second.not_started) {
        requeue(s);  // given back: the requeue again, never a start
        return answer(s.from, ack, "failed");
      }
      if (had->second.ended && !had->second.share) propose_end(s.job, had->second);  // a share's end is not the job's
      return answer(s.from, ack, "started");
    }
    // Daemon::mesh_share: this node's share of a job across nodes; the first node runs it.
    std::size_t i = 0;
    while (i < s.nodes.size() && s.nodes[i] != name_) ++i;
    if (i == s.nodes.size()) return answer(s.from, ack, "refused");
    int cores = s.slots.size() == s.nodes.size() ? s.slots[i] : s.spec.spec.ncpus;
    if (i == 0 && used() + cores > cores_ - taken_) {  // a share takes busy cores rather than give back
      // Not started: back to the queue; the record stays, so a resend never starts it.
      journal_[s.job] = Record{s.run, 0, true, 0, true};
      requeue(s);
      return answer(s.from, ack, "failed");
    }
    Record& r = journal_[s.job];
    r = Record{s.run, up_.now_ms() + runtime_ms(s.spec.spec), false, cores};
    if (i > 0) {
      r.share = true;
      return answer(s.from, ack, "started");
    }
    watch_.launched(name_, s);
    watch_end(s.job);
    answer(s.from, ack, "started");
  }

  // Daemon::mesh_stop: the coordinator stops a run here (a share of a run across nodes that is over).
  // Its end is proposed as a user's cancel's is (refused when the log has the run over already).
  void stop(const jobs::CancelJob& c) {
    if (c.term < term_) return;
    auto it = journal_.find(c.job);
    if (it == journal_.end() || it->second.ended || it->second.run > c.run) return;  // an older run: stale too
    it->second.ended = true;
    if (it->second.share) return;
    it->second.cancelled = true;
    watch_.killed(name_, c.job, c.run);
    if (is_up()) propose_end(c.job, it->second);
  }

  // The jobs this node runs, as its hello reports them.
  std::vector<std::uint64_t> running() const {
    std::vector<std::uint64_t> out;
    for (const auto& [job, r] : journal_)
      if (!r.ended) out.push_back(job);
    return out;
  }
  const Record* record(std::uint64_t job) const {
    auto it = journal_.find(job);
    return it == journal_.end() ? nullptr : &it->second;
  }
  int cores() const { return cores_; }
  // Cores taken by something the coordinator does not know of (its starts may then not fit).
  void take(int n) { taken_ = n; }
  const std::string& name() const { return name_; }

  // A job's run time, from its name ("t<ms>").
  static std::uint64_t runtime_ms(const corral::proto::JobSpec& s) { return std::stoull(s.name.substr(1)); }

 private:
  int used() const {
    int n = 0;
    for (const auto& [job, r] : journal_)
      if (!r.ended) n += r.cores;
    return n;
  }
  void answer(std::uint64_t to, jobs::StartAck ack, const char* status) {
    ack.status = status;
    up_.ack(to, ack);
  }
  void watch_end(std::uint64_t job) {
    Record& r = journal_.at(job);
    std::uint64_t now = up_.now_ms();
    std::uint64_t inc = incarnation_;
    up_.after(r.end_ms > now ? r.end_ms - now : 0, [this, job, run = r.run, inc] {
      if (inc != incarnation_ || !is_up()) return;  // a later incarnation watches it
      auto it = journal_.find(job);
      if (it == journal_.end() || it->second.run != run || it->second.ended) return;
      it->second.ended = true;
      watch_.exited(name_, job, run);
      propose_end(job, it->second);
    });
  }
  void requeue(const jobs::StartJob& s) { propose_requeue(s.job, s.run); }
  void propose_requeue(std::uint64_t job, std::int32_t run) {
    up_.propose(mesh::JobRequeued{job, run, "given back by " + name_, up_.wall_s()});
  }
  // Daemon::mesh_ended: sent until the mesh has it (or refuses it).
  void propose_end(std::uint64_t job, const Record& r) {
    if (r.cancelled) up_.propose(mesh::JobEnded{job, r.run, "cancelled", -1, up_.wall_s()});
    else up_.propose(mesh::JobEnded{job, r.run, "completed", 0, up_.wall_s()});
  }

  std::string name_;
  int cores_;
  AgentWatch& watch_;
  Up up_;
  int taken_ = 0;
  bool lost_ = false;              // the runs went down with the agent
  std::uint64_t term_ = 0;         // the newest coordinator term a start came from (memory only)
  std::uint64_t incarnation_ = 0;
  std::map<std::uint64_t, Record> journal_;
};

}  // namespace corral_test
