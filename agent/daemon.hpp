// corrald: the node agent. In standalone mode it is a whole Corral on one
// node. Daemon is the composition of the agent's parts, each in its own file:
//   daemon.cpp        setup, the loop, the write-ahead commit before replies
//   local_socket.cpp  the local socket: connections, framing, peer credentials
//   commands.cpp      the commands users send over it (submit, stat, ...)
//   job_state.cpp     the job store bridge: a job's state changes, its script
//   node_bridge.cpp   the node and launcher bridge: starting, ending, limits,
//                     usage, adopting jobs after a restart
//   scheduling.cpp    the scheduling cycle: snapshot() and apply()
//   dependencies.cpp  jobs that wait for other jobs (-W depend, -hold_jid)
//   arrays.cpp        job arrays (-J, -t): tasks handed to the scheduler a few at a time
//   wait_reasons.cpp  why a pending job waits and its planned start (`corral stat`)
//   charging.cpp      NCI charging: service units as jobs run, the ledger
//                     (ledger_book.hpp), grants, `corral report`
//   events.hpp        the event publisher (ZeroMQ PUB)
//   mesh_link.cpp     the link to the mesh (raft on its own thread), when configured
//   mesh_submit.cpp   entries and cancels on their way to the coordinator (mesh thread)
//   mesh_jobs.cpp     submit, stat and cancel through the mesh; the coordinator's starts
//   operator_commands.cpp  hold, release, qmove, drain, undrain, nodes on a standalone node
//   mesh_operator.cpp the same through the mesh's coordinator
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

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "agent/events.hpp"
#include "agent/id_set.hpp"
#include "agent/ledger_book.hpp"
#include "agent/log.hpp"
#include "agent/node/criu.hpp"
#include "agent/node/owner.hpp"
#include "agent/store.hpp"
#include "coordinator/model.hpp"
#include "coordinator/schedule.hpp"
#include "proto/mesh_jobs.hpp"
#include "proto/proto.hpp"

namespace corral::node {
class NodeBackend;
struct Topology;
struct JobEnd;
}  // namespace corral::node

namespace corral::service {
struct MeshJob;
}  // namespace corral::service

namespace corral::agent {

class MeshLink;
class ExecWatch;

// Who is on the other end of a socket connection (SO_PEERCRED).
struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  bool admin = false;  // root, or a member of the operators group: acts on every job
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

  // ---- the mesh boundary (scheduling.cpp) -------------------------------
  // State out: this node and its pending/running jobs at wall time `now`.
  Snapshot snapshot(Time now) const;
  // Decisions in (from the local core in standalone mode, later from the
  // elected coordinator). Unknown jobs or impossible actions are logged and
  // skipped; a plan can never corrupt the state.
  void apply(const Plan& plan);

  // A connection on the local socket (local_socket.cpp).
  struct Client;

 private:
  // ---- composition (daemon.cpp) -----------------------------------------
  void setup_signals();
  void on_signals();
  bool commit_and_reply();
  void refuse_unsynced_submits();
  double now() const;
  // A stopping coordinator's handover takes a round trip; 3 tries of an election timeout
  // (300 ms) when the voter it picked died meanwhile.
  static constexpr double kLeaveS = 3;
  static constexpr double kNamedS = 0.5;  // stepped down, a new coordinator is named within this

  // ---- the local socket (local_socket.cpp) ------------------------------
  static constexpr std::size_t kMaxClients = 4096;
  void setup_socket();
  void setup_limits();
  void close_socket();
  bool listening(double mono) const;  // whether to poll the listener now
  void accept_clients();
  bool admit(const Peer& p, bool privileged, std::string& why) const;
  bool privileged(const Peer& p);
  // Who may act on other users' jobs, for refusals: "root" or "root or a member of group G".
  std::string admins() const;
  short client_events(const Client& c) const;
  std::size_t read_room(const Client& c) const;
  void account(Client& c);
  void close_idle(double mono);
  void reap_clients();
  void read_client(Client& c, bool hup);
  void serve_buffered(Client& c);
  void handle(Client& c, const std::string& frame);
  void send(Client& c, const proto::Message& m);
  void write_client(Client& c);
  void notify_waiters(const JobRecord& rec);

  // ---- the commands (commands.cpp) --------------------------------------
  proto::Message on_submit(const Peer& p, proto::SubmitReq& r);
  // A submit's checks against this node and its configuration (the spec gets its defaults).
  std::optional<proto::ErrorRep> check_submit(const Peer& p, proto::JobSpec& s);
  proto::Message on_stat(const Peer& p, const proto::StatReq& r);
  proto::Message on_cancel(const Peer& p, const proto::CancelReq& r);
  proto::Message on_control(const Peer& p, const proto::ControlReq& r);
  proto::Message on_node(const Peer& p, const proto::NodeReq& r);
  proto::Message on_report(const Peer& p, const proto::ReportReq& r);
  void mesh_report(Client& c, const proto::ReportReq& r);
  proto::Message on_mesh(const Peer& p, const proto::MeshReq& r);

  // ---- operator commands (operator_commands.cpp) -------------------------
  proto::Message on_job_admin(const Peer& p, const proto::ControlReq& r);  // hold, release, qmove
  proto::Message on_hold(const Peer& p, JobRecord& rec, bool hold);
  proto::Message on_qmove(const Peer& p, JobRecord& rec, const std::string& queue);
  proto::Message on_node_admin(const Peer& p, const proto::NodeAdminReq& r);
  proto::Message on_nodes(const Peer& p, const proto::NodesReq& r);
  void mesh_job_admin(Client& c, const proto::ControlReq& r);
  void mesh_node_admin(Client& c, const proto::NodeAdminReq& r);
  void mesh_nodes(Client& c, const proto::NodesReq& r);
  // SIGTERM on the coordinator: hands its role to another voter, then stops (false: this node
  // does not coordinate, nothing to hand over).
  bool mesh_leave();
  void mesh_left();  // while handing over: stops once this node no longer coordinates, or at leave_by_
  void load_drain();

  // ---- accounting and the allocation calendar (acct.cpp, alloc_calendar.cpp) ----
  proto::Message on_acct(const Peer& p, const proto::AcctReq& r);
  void mesh_acct(Client& c, const proto::AcctReq& r);
  proto::Message on_alloc(const Peer& p, const proto::AllocReq& r);
  void mesh_alloc(Client& c, const proto::AllocReq& r);
  std::string check_alloc_set(pba::ProjectPlan& plan, std::vector<proto::AllocSetting>& set) const;
  void load_allocations();
  const std::string& node_name() const { return cfg_.node_name.empty() ? hostname_ : cfg_.node_name; }

  // ---- jobs through the mesh (mesh_jobs.cpp) ------------------------------
  void mesh_submit(Client& c, proto::SubmitReq& r);
  void mesh_stat(Client& c, const proto::StatReq& r);
  // A mesh's late answer to the request `ticket` of the connection `fd`, if it still waits.
  void mesh_answer(int fd, std::uint64_t ticket, const proto::Message& m);
  void mesh_cancel(Client& c, const proto::CancelReq& r);
  // `corral wait` on a mesh job (mesh_jobs.cpp): answered when the replicated state has its end.
  void mesh_wait(Client& c, const proto::WaitReq& r);
  void mesh_wait_ended(std::uint64_t job);
  void mesh_order(const proto::jobs::Message& m);
  void mesh_start(const proto::jobs::StartJob& s);
  void mesh_stop(const proto::jobs::CancelJob& s);
  void mesh_removed(const std::string& by);
  // The coordinator's suspend, resume, requeue or checkpoint of a run here (mesh_orders.cpp).
  void mesh_control(const proto::jobs::JobOrder& o);
  void mesh_ended(const JobRecord& rec);
  // A run this node cannot go on with goes back to the mesh's queue (mesh_jobs.cpp).
  void mesh_give_back(JobRecord& r, const std::string& why);
  void mesh_requeue(const JobRecord& r);
  void mesh_report_node();
  // A start across nodes (mesh_shares.cpp): this node's share of the job on `rec` (cpus, memory,
  // jobfs; share set when the script runs elsewhere), and on the first node the host files in
  // its environment. Returns "" or why this node cannot take its part.
  std::string mesh_share(JobRecord& rec, const proto::jobs::StartJob& s);
  void remove_host_files(std::uint64_t id);
  // Job arrays through the mesh (mesh_arrays.cpp): request `m` naming task `index` of `array`
  // (ID[INDEX]): a stat answered from this member's replica, any other request sent on with the
  // task's own id, which the coordinator gives.
  void mesh_name_task(Client& c, proto::Message m, std::uint64_t array, std::int64_t index);

  // ---- `corral exec` (mesh_exec.cpp) ------------------------------------
  void mesh_exec(Client& c, const proto::ExecReq& r);
  void mesh_exec_start(const proto::jobs::ExecStart& x);
  void mesh_exec_output(const proto::jobs::ExecOutput& o);
  void mesh_exec_end(const proto::jobs::ExecEnd& e);
  void mesh_exec_alive(const proto::jobs::ExecAlive& a);
  void mesh_exec_cancel(const proto::jobs::ExecCancel& x);
  // The caller's stdin: on its node, sent on to NODE (kept until the call is sent there); on
  // NODE, written to the process.
  void exec_input(Client& c, const proto::ExecIn& in);
  void mesh_exec_input(const proto::jobs::ExecInput& in);
  // The caller of call `ticket` went away (its connection closed): its process is stopped.
  void exec_caller_gone(std::uint64_t ticket);
  // Calls whose node has not been heard of for kExecSilentS fail, and their process is stopped.
  void exec_watchdog(double mono);

  // ---- the job store bridge (job_state.cpp) -----------------------------
  void load_jobs();
  void finish(JobRecord& rec, EndReason why, int exit_code, const std::string& msg);
  // A running job back to pending: its run ends "preempted" (every end records why).
  void requeue(JobRecord& rec, const std::string& why, bool keep_work, int exit_code = -1);
  proto::JobInfo info(const JobRecord& rec) const;
  std::string write_script(const JobRecord& rec);
  void remove_script(std::uint64_t id);

  // ---- the node and launcher bridge (node_bridge.cpp) -------------------
  void setup_launcher();
  void setup_emulated();
  void recover();
  void adopt_unknown(std::uint64_t id);
  void start_job(JobRecord& rec, const Decision& d);
  std::vector<int> start_cores(const JobRecord& rec, const Decision& d, int& want) const;
  std::string suspend_resume(JobRecord& rec, bool suspend, const std::string& reason);
  // Asks the launcher to requeue or checkpoint a running job (its end then comes back as
  // preempted or checkpointed, and requeue() puts it back); `pba`: PBA's requeue, counted toward
  // its bound. Returns "" or the launcher's error.
  std::string stop_for_requeue(JobRecord& rec, bool checkpoint, const std::string& reason, bool pba);
  // Asks the launcher to cancel a running job (its end comes back at the next poll_launcher),
  // `comment` saying why; a launcher error is logged.
  void stop_for_cancel(JobRecord& rec, const std::string& comment);
  void poll_launcher();
  void on_end(const node::JobEnd& e);
  void heartbeat();
  void sample_usage(bool publish);
  int slots_used() const;

  // ---- the scheduling cycle (scheduling.cpp) ----------------------------
  void setup_scheduling();
  void setup_pba();
  Time pba_origin();
  void cycle();
  std::vector<Queue> snapshot_queues() const;
  void snapshot_fixed(Snapshot& s, Time t) const;  // everything but the pending jobs
  const Snapshot& pass_snapshot(Time t);
  void drop_pass_snapshot();
  void open_monitor();
  void write_monitor(const std::vector<std::string>& lines);

  // ---- dependencies (dependencies.cpp) ----------------------------------
  // A new or loaded job with unmet dependencies: kept out of the queue until they are met.
  void hold_for_dependencies(const JobRecord& rec);
  // The jobs waiting for `id` (it ended) are checked at the next resolve_dependencies().
  void dependency_ended(std::uint64_t id);
  // Checks the waiting jobs queued: each whose dependencies are met joins the queue; each
  // whose dependency can never be met ends dependency_never_met.
  void resolve_dependencies();
  std::string dependency_text(const JobRecord& rec) const;

  // ---- job arrays (arrays.cpp) ---------------------------------------------
  // Hands each array's next tasks to the scheduler (a few pending at a time, within its limit
  // of running tasks) and ends each array whose tasks have all ended.
  void feed_arrays();
  JobRecord& hand_out(JobRecord& arr, std::int64_t index);
  void settle_array(JobRecord& arr);
  // A task ended: its array counts it (finish()).
  void array_task_ended(const JobRecord& task);
  // Whether its array's limit of running tasks lets `task` start now (a task handed out out of
  // turn, by name, may wait in the queue beyond the limit).
  bool array_room(const JobRecord& task) const;
  // Task `index` of array `id`: its record's id in `id`, or the refusal. A task not yet handed
  // to the scheduler is handed out now when `hand` (cancel, hold, wait; the caller must own
  // the array), else `id` becomes 0 (stat shows it queued).
  std::optional<proto::ErrorRep> find_task(const Peer& p, std::uint64_t& id, std::int64_t index, bool hand);
  // A request naming a task (ID[INDEX]) made to name its record; false when answered (refused).
  bool name_task(Client& c, proto::Message& m);
  proto::Message cancel_array(const Peer& p, JobRecord& arr);
  proto::Message hold_array(const Peer& p, JobRecord& arr, bool hold);
  void array_info(const JobRecord& rec, proto::JobInfo& j) const;
  void stat_array(const Peer& p, const proto::StatReq& r, const JobRecord& arr, proto::StatRep& rep) const;
  proto::JobInfo queued_task_info(const JobRecord& arr, std::int64_t index) const;

  // ---- why pending jobs wait (wait_reasons.cpp) ---------------------------
  void note_plan(const Plan& plan);
  void wait_info(const JobRecord& rec, proto::JobInfo& j) const;
  static bool stat_match(const Peer& p, const proto::StatReq& r, const JobRecord& rec);
  static bool stat_match(const Peer& p, const proto::StatReq& r, std::uint32_t uid, const std::string& user,
                         const std::string& project, const std::string& state);

  // ---- NCI charging (charging.cpp) --------------------------------------
  void setup_charging();
  // Charges a started job's running seconds up to wall time t (close: its run ends at t).
  void charge_job(const JobRecord& rec, double t, bool close);
  void charge_running(double t);
  void flush_ledger(bool sync);
  void charge_info(const JobRecord& rec, proto::JobInfo& j) const;

  // ---- state --------------------------------------------------------------
  Config cfg_;
  double boot_ = 0;
  double boot_mono_ = 0;
  std::string hostname_;
  bool stop_ = false;
  double leave_by_ = 0;  // monotonic; > 0: handing the coordinator over, stopping by then
  double stepped_down_ = 0;  // monotonic: when, handing over, this node stopped coordinating
  int sig_pipe_[2] = {-1, -1};
  double next_cycle_ = 0, next_heartbeat_ = 0, next_poll_ = 0, next_usage_ = 0;  // monotonic

  // local socket
  std::map<int, std::unique_ptr<Client>> clients_;
  int listen_fd_ = -1;
  std::size_t max_clients_ = kMaxClients;  // below the open-file limit
  std::size_t reserve_ = 64;               // of those, only root and operators may use
  std::size_t unprivileged_ = 0;           // connections of other users
  std::map<uid_t, std::size_t> per_user_;  // connections of each (unprivileged) user
  std::map<uid_t, std::size_t> buffered_;  // request bytes held for each (unprivileged) user
  std::size_t buffered_total_ = 0;         // request bytes held for unprivileged users
  double accept_paused_until_ = 0;         // monotonic: out of file descriptors
  bool accept_starved_ = false;            // accept failed for want of descriptors; none since
  double next_idle_check_ = 0;             // monotonic
  gid_t operators_gid_ = 0;
  bool have_operators_ = false;
  std::map<uid_t, std::pair<bool, double>> operator_cache_;  // uid -> member?, until (monotonic)

  // job store
  std::unique_ptr<Store> store_;
  IdSet pending_;                     // ids, submit order
  std::set<std::uint64_t> active_;    // running or suspended
  // Pending jobs with unmet dependencies (not in pending_: not eligible), the jobs waiting for
  // each job (its id -> theirs), and the waiting jobs to check at the next pass.
  std::set<std::uint64_t> dep_waiting_;
  std::multimap<std::uint64_t, std::uint64_t> dependents_;
  std::vector<std::uint64_t> dep_check_;
  // Job arrays not yet ended -> their tasks not ended; every task kept, by (array, index).
  std::map<std::uint64_t, std::set<std::uint64_t>> array_live_;
  std::map<std::pair<std::uint64_t, std::int64_t>, std::uint64_t> array_tasks_;
  // Pending jobs on hold (corral hold; not in pending_: no pass sees them until released).
  std::set<std::uint64_t> held_;
  // This node drained (corral drain; kept in state_dir/drain): no job starts here.
  bool drained_ = false;
  std::string drain_reason_;
  std::map<std::string, std::int32_t> alloc_changes_;  // corral alloc set: "project/week" -> slots
  bool need_sync_ = false;            // a change must reach the disk (timer-driven sync)
  // Submits answered in this iteration, not yet on disk: where each acknowledgement sits in its
  // client's output, to be replaced by a refusal when the state disk is full.
  struct UnsyncedSubmit {
    int fd;
    std::uint64_t id;
    std::size_t at, len;
  };
  std::vector<UnsyncedSubmit> unsynced_submits_;
  bool disk_full_ = false;            // the last write found the state disk full (logged once)
  node::NewFileOwner scripts_owner_;  // write_script(): no fchown of a script already the user's

  // node and launcher
  std::unique_ptr<node::NodeBackend> launcher_;  // the Launcher, or an EmulatedNode (--emulate)
  std::set<std::uint64_t> discard_end_;  // ends to ignore (stray adopted jobs)
  node::CriuProbe criu_;              // `criu check` at start (reported; never used)

  // scheduling
  SchedConfig sched_;
  PreemptMode preempt_mode_ = PreemptMode::Requeue;  // preempt_mode, for every job
  bool dirty_ = true;                 // schedule at the next iteration
  std::uint64_t passes_ = 0;
  // The pass's Snapshot, kept between passes: its pending jobs follow pending_ (new ones
  // converted, started ones dropped, the rest refreshed in place) instead of being rebuilt from
  // the store each pass. snap_recs_[i] is the store record of snap_.pending[i] (std::map nodes
  // stay put; a pending job is never erased).
  Snapshot snap_;
  std::vector<const JobRecord*> snap_recs_;
  // Ids whose record changed in a way the core sees (policy updates, a Demote, a requeue) since
  // the last pass: the only kept entries pass_snapshot() refreshes. Every other pending record
  // is fixed while it waits.
  std::vector<std::uint64_t> snap_stale_;
  Planner planner_;
  Plan plan_;
  // The last pass's reservations: job -> its planned start (a pending job's planned_start).
  std::map<std::uint64_t, Time> reserved_at_;
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> monitor_;  // Config::monitor_file, open while set

  // NCI charging: nullptr without nci = yes
  std::unique_ptr<LedgerBook> book_;
  std::set<std::uint64_t> uncharged_;  // jobs whose charge failed (logged once)
  std::vector<proto::mesh::GrantSet> grants_;  // nci_plan's (else pba_plan's) grants, for the mesh
  bool ledger_full_ = false;           // the last ledger write found the state disk full

  // events
  EventPublisher pub_;

  // the mesh (none when standalone)
  std::unique_ptr<MeshLink> mesh_;
  std::uint64_t mesh_tickets_ = 0;    // requests handed to the mesh so far
  std::uint64_t mesh_term_ = 0;       // the newest coordinator term a start came from
  // The newest order (decided term, decision) carried out for each job here: never an older one.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> mesh_orders_;
  // Runs stopped because the mesh removed this node: their ends are not sent (it has them).
  std::set<std::uint64_t> mesh_removed_runs_;
  bool mesh_told_removed_ = false;    // logged once, then only when runs are stopped
  // `corral exec`: the connection each call of this node waits on (by its ticket), and the
  // processes started here for other nodes' calls (its threads use mesh_: reset first).
  struct ExecCall {
    int fd = -1;
    std::string node;
    double heard = 0;                 // monotonic: the node's last word on it
    bool sent = false;                // its ExecStart is on its way: input follows it
    std::vector<proto::jobs::ExecInput> input;  // the caller's stdin until then
  };
  std::map<std::uint64_t, ExecCall> exec_calls_;
  std::unique_ptr<ExecWatch> exec_watch_;
};

// A task's index variables (CORRAL_ARRAY_INDEX, PBS_ARRAY_INDEX, SGE_TASK_ID, ...) into env.
void array_env(const JobRecord& task, std::map<std::string, std::string>& env);
// A task's -o / -e path from its array's: PBS's ^array_index^ and Grid Engine's $TASK_ID
// replaced by the index, else ".INDEX" appended (/dev/null stays).
std::string task_path(const std::string& path, std::int64_t index);

// The name of the user `uid` ("" when it has none).
std::string user_name(uid_t uid);

// A request to the mesh's coordinator as this node's local socket saw its user (mesh_operator.cpp).
proto::jobs::CancelAsk mesh_ask(const Peer& p, std::string action);
// A replicated job as users see it (mesh_jobs.cpp); an array's counts are mesh_arrays.cpp's.
proto::JobInfo mesh_info(const service::MeshJob& j);
// A replicated job's -o (err false) or -e file: as submitted, else NAME.oID in its directory; a
// task's is its array's made its own (task_path).
std::string mesh_output(const proto::JobSpec& s, bool err, std::uint64_t id, std::uint64_t array_id, std::int64_t index);
// `corral stat` of the replicated jobs `jobs` (mesh_arrays.cpp): an array with its tasks' counts,
// its tasks listed under it only with -t (r.tasks).
proto::StatRep mesh_stat_list(const proto::StatReq& r, const std::vector<service::MeshJob>& jobs);

// The node as corrald sees it: the emulated node (emulate), the declared shape (declare_cores),
// the recorded XML (topology_xml), else hwloc's discovery (jobfs_dir: where its scratch space is measured; "" for
// none). --export-topology writes this.
node::Topology agent_topology(const Config& cfg, const std::string& jobfs_dir);

// A project plan file (docs/plan-file.md) with relative dates counted from `origin`. Throws
// std::runtime_error("KEY FILE: why") when it cannot be read, has bad lines or no project.
pba::ProjectPlan read_plan(const std::string& key, const std::string& path, Time origin);

}  // namespace corral::agent
