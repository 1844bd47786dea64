// corrald: the node agent. In standalone mode it is a whole Corral on one
// node: it keeps its jobs (Store), serves the local socket, publishes events
// over ZeroMQ PUB, runs the scheduling core each cycle and applies the plan
// through the node part's Launcher.
//
// The boundary a mesh plugs into is snapshot() (state out: this node and its
// jobs, as the core sees them) and apply() (decisions in). In standalone mode
// the daemon itself calls schedule(snapshot()) and apply(); in a mesh the
// elected coordinator sends the decisions instead.
//
// One thread, one poll(): the listening socket, the clients, the Launcher's
// wake fd (a job's shepherd exited), a self-pipe for SIGTERM/SIGINT/SIGHUP,
// and a timeout that is the nearest deadline (scheduling cycle, heartbeat,
// limit checks while jobs run, usage samples). Nothing is polled busily; a
// submit or a job end marks the schedule dirty and the pass runs in the same
// loop iteration.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "agent/node/criu.hpp"
#include "agent/node/owner.hpp"
#include "agent/store.hpp"
#include "coordinator/model.hpp"
#include "coordinator/schedule.hpp"
#include "proto/proto.hpp"

namespace corral::node {
class Launcher;
struct Topology;
struct JobEnd;
}  // namespace corral::node

namespace corral::agent {

// Who is on the other end of a socket connection (SO_PEERCRED).
struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

// Job ids in increasing order in one sorted vector (the pending queue): every scheduling pass
// walks all of them, and a std::set's node-by-node walk was ~8 % of the agent's CPU per launch
// with 2,000 jobs queued. New submits have the largest id (an append); a start erases near the
// front (a move of 8-byte ids).
class IdSet {
 public:
  using const_iterator = std::vector<std::uint64_t>::const_iterator;
  bool insert(std::uint64_t id) {
    if (v_.empty() || v_.back() < id) {
      v_.push_back(id);
      return true;
    }
    auto it = std::lower_bound(v_.begin(), v_.end(), id);
    if (it != v_.end() && *it == id) return false;
    v_.insert(it, id);
    return true;
  }
  std::size_t erase(std::uint64_t id) {
    auto it = std::lower_bound(v_.begin(), v_.end(), id);
    if (it == v_.end() || *it != id) return 0;
    v_.erase(it);
    return 1;
  }
  std::size_t count(std::uint64_t id) const { return std::binary_search(v_.begin(), v_.end(), id) ? 1 : 0; }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }

 private:
  std::vector<std::uint64_t> v_;
};

class Daemon {
 public:
  // Opens the state, the Launcher (recovering leftovers of a previous run),
  // the socket and the PUB endpoint. Throws std::runtime_error with a clear
  // message when any of them cannot be set up.
  explicit Daemon(Config cfg);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Serves until SIGTERM/SIGINT (or stop()). Returns the process exit code.
  int run();
  void stop() { stop_ = true; }

  // ---- the mesh boundary ------------------------------------------------
  // State out: this node and its pending/running jobs at wall time `now`.
  Snapshot snapshot(Time now) const;
  // Decisions in (from the local core in standalone mode, later from the
  // elected coordinator). Unknown jobs or impossible actions are logged and
  // skipped; a plan can never corrupt the state.
  void apply(const Plan& plan);

  // Handles one decoded request from `peer`; returns the reply, or nothing
  // when the reply is deferred (wait on a running job). Exposed for tests.
  struct Client;

 private:
  void setup_socket();
  void setup_pba();
  void setup_pub();
  void recover();
  void accept_clients();
  void read_client(Client& c);
  void handle(Client& c, const std::string& frame);
  void send(Client& c, const proto::Message& m);
  void write_client(Client& c);
  proto::Message on_submit(const Peer& p, proto::SubmitReq& r);
  proto::Message on_stat(const Peer& p, const proto::StatReq& r);
  proto::Message on_cancel(const Peer& p, const proto::CancelReq& r);
  proto::Message on_node(const Peer& p, const proto::NodeReq& r);
  void cycle();
  bool commit_and_reply();
  void poll_launcher();
  void on_end(const node::JobEnd& e);
  void start_job(JobRecord& rec, const Decision& d);
  std::string suspend_resume(JobRecord& rec, bool suspend, const std::string& reason);
  proto::Message on_control(const Peer& p, const proto::ControlReq& r);
  std::vector<Queue> snapshot_queues() const;
  void snapshot_fixed(Snapshot& s, Time t) const;  // everything but the pending jobs
  const Snapshot& pass_snapshot(Time t);
  void finish(JobRecord& rec, const std::string& reason, int exit_code, const std::string& msg);
  // A running job back to pending: its run ends "preempted" (issue 3: every end records why).
  void requeue(JobRecord& rec, const std::string& why, bool keep_work, int exit_code = -1);
  void notify_waiters(const JobRecord& rec);
  void heartbeat();
  void sample_usage(bool publish);
  void publish(proto::Event& e);
  void send_events();
  proto::JobInfo info(const JobRecord& rec) const;
  std::string write_script(const JobRecord& rec);
  void remove_script(std::uint64_t id);
  int slots_used() const;
  double now() const;

  Config cfg_;
  SchedConfig sched_;
  PreemptMode preempt_mode_ = PreemptMode::Requeue;  // preempt_mode, for every job
  std::unique_ptr<Store> store_;
  std::unique_ptr<node::Launcher> launcher_;
  IdSet pending_;                     // ids, submit order
  std::set<std::uint64_t> active_;    // running or suspended
  std::set<std::uint64_t> discard_end_;  // ends to ignore (stray adopted jobs)
  std::map<int, std::unique_ptr<Client>> clients_;
  int listen_fd_ = -1;
  int sig_pipe_[2] = {-1, -1};
  void* zctx_ = nullptr;              // zmq context / PUB socket (raw API keeps the header light)
  void* zpub_ = nullptr;
  std::uint64_t seq_ = 0;
  double boot_ = 0;
  double boot_mono_ = 0;
  std::string hostname_;
  bool dirty_ = true;                 // schedule at the next iteration
  bool need_sync_ = false;            // a change must reach the disk (timer-driven sync)
  bool stop_ = false;
  node::CriuProbe criu_;              // `criu check` at start (reported; never used)
  node::NewFileOwner scripts_owner_;  // write_script(): no fchown of a script already the user's
  std::uint64_t passes_ = 0;
  // The pass's Snapshot, kept between passes: its pending jobs follow pending_ (new ones
  // converted, started ones dropped, the rest refreshed in place) instead of being rebuilt from
  // the store each pass (~20 % of the agent's CPU per launch with 2,000 queued). snap_recs_[i] is
  // the store record of snap_.pending[i] (std::map nodes stay put; a pending job is never erased).
  Snapshot snap_;
  std::vector<const JobRecord*> snap_recs_;
  // Ids whose record changed in a way the core sees (policy updates, a Demote, a requeue) since
  // the last pass: the only kept entries pass_snapshot() refreshes. Every other pending record
  // is fixed while it waits.
  std::vector<std::uint64_t> snap_stale_;
  Planner planner_;
  Plan plan_;
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> monitor_;  // Config::monitor_file, open while set
  void open_monitor();
  Time pba_origin();
  void write_monitor(const std::vector<std::string>& lines);
  std::vector<std::pair<std::string, std::string>> events_out_;  // published, not yet sent (topic, payload)
  double next_cycle_ = 0, next_heartbeat_ = 0, next_poll_ = 0, next_usage_ = 0;  // monotonic
};

// The node as corrald sees it: the declared shape (declare_cores), the recorded XML
// (topology_xml), else hwloc's discovery (jobfs_dir: where its scratch space is measured; "" for
// none). --export-topology writes this.
node::Topology agent_topology(const Config& cfg, const std::string& jobfs_dir);

// Log one line to the daemon log ("2026-01-02T03:04:05.678Z corrald: ...").
void log_line(const std::string& msg);
// Sends the log to `path` (append) instead of stderr; "" keeps stderr.
void log_to(const std::string& path);

}  // namespace corral::agent
