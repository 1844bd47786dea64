// The coordinator's pass, on the member that leads (on the mesh thread).
//
// On election it first commits a barrier (the replicated state is then
// current), sends every committed start again to its node (a start the old
// coordinator decided but never delivered is settled on the node it chose,
// never started elsewhere; a node that has it already just acknowledges),
// and only then schedules. A pass builds one Snapshot from the replicated
// jobs and the nodes' reports (cores, memory, what each runs), runs the same
// schedule() a standalone corrald runs, and proposes a JobStarted for each
// start. Once committed, the decision is pushed to the node it names and
// pushed again until the node acknowledges.
//
// The pass's suspensions, resumptions, requeues and checkpoints (NCI, PBA,
// checkpoint backfilling) are orders (job_orders.cpp): one JobOrdered entry
// each, pushed once committed to every node of the run until it acknowledges;
// a node's acknowledgement of a suspend or resume is committed too (JobSuspended).
// Its rejections end jobs (job_fit.cpp); NCI's demotions (to bonus) and PBA's
// (to its lowest queue) move them in the log (coordinator_grants.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "coordinator/schedule.hpp"
#include "coordinator/service/consensus.hpp"
#include "coordinator/service/env.hpp"
#include "coordinator/service/job_desk.hpp"
#include "coordinator/service/mesh_state.hpp"
#include "coordinator/service/voter_change.hpp"
#include "proto/mesh_jobs.hpp"

namespace corral::service {

// A node as its agent last reported it.
struct NodeReport {
  std::uint64_t member = 0;
  std::string name;
  int cores = 0;
  std::int64_t mem_mb = 0;
  std::int64_t jobfs_mb = 0;
  std::vector<std::uint64_t> running;  // job ids it runs
  std::uint64_t at_ms = 0;             // when heard (Env clock)
  bool stopping = false;               // its corrald said it shuts down (its last heartbeat)
};

class CoordinatorLoop {
 public:
  // Sends a start or a cancel to a member (this one included).
  using Push = std::function<void(std::uint64_t member, const proto::jobs::Message& m)>;
  // `c` and `state` outlive the loop; `state` is the member's applied state.
  CoordinatorLoop(Env& env, Consensus& c, const MeshState& state, std::string mesh, SchedConfig sched,
                  std::vector<Queue> queues, Push push);
  ~CoordinatorLoop();

  // A drained node not heard from for this long may be removed with its jobs (member_remove.cpp).
  static constexpr std::uint64_t kNodeDownMs = 10000;

  void leadership(bool leader, std::uint64_t term);
  void node(const NodeReport& r);
  // A node heard of (its heartbeat), before its report is current: an operator may name it.
  // `member`: its raft id (a voter is named by it in `corral mesh remove`).
  void heard_of(const std::string& name, std::uint64_t member = 0) {
    heard_of_.insert(name);
    if (member) heard_ids_[name] = member;
  }
  void on_ack(const proto::jobs::StartAck& a);
  // A user's cancel: a pending job ends "cancelled" in the log; a running
  // one gets a CancelAsked entry (a new coordinator knows of it) and is
  // stopped by its nodes, whose end reaches the log as any end. `done`
  // says "ok" (message: the job's state) or why not; the owner, root and
  // operators may cancel, as on a standalone node.
  // The other requests (ask.action set) go to operate().
  void cancel(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  // An operator request (operator_asks.cpp): hold, release or qmove of a pending job (its
  // owner, root or an operator; an operator's hold only root or an operator releases), drain
  // or undrain of a node (root or an operator). Answered once the entry is committed.
  void operate(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  // Whether the barrier of this term is committed: the pass runs.
  bool deciding() const { return ready_; }
  // After every pass that ran schedule(): its wall and thread CPU time
  // (build, schedule and proposals), the pending jobs it saw and the starts
  // it proposed.
  using PassWatch = std::function<void(double ms, double cpu_ms, std::size_t pending, std::size_t starts)>;
  void watch_passes(PassWatch w) { watch_ = std::move(w); }
  // A user's suspend, resume, requeue or checkpoint (job_orders.cpp), with a standalone node's
  // rules: suspend and resume root or an operator; requeue and checkpoint also the owner.
  void control(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  // The grants this member is configured with (a plan file's `grant` lines, NCI): proposed
  // once a term where the replicated ones differ (coordinator_grants.cpp).
  void set_grants(std::vector<proto::mesh::GrantSet> grants) { grants_ = std::move(grants); }
  // job_fit.cpp: why the mesh refuses entry e ("" to propose it): a job no set of the nodes
  // heard from could hold. Nothing is refused before every node has had the time to report.
  std::string admit(const proto::mesh::Entry& e) const;
  // job_waits.cpp: why each of `jobs` (those pending and not held) waits and when the last pass
  // plans to start it; "not_leader" unless this member leads and decides.
  proto::jobs::WaitAnswer waits(const std::vector<std::uint64_t>& jobs) const;

 private:
  void tick();
  void pass();
  Snapshot build(Time now, std::vector<std::string>& names) const;
  void decide(const Decision& d, const std::vector<std::string>& names);
  void push_start(std::uint64_t job);
  // job_orders.cpp: a Suspend, Resume, Requeue or Checkpoint of the pass, committed then pushed
  // to every node of the run.
  void order(const Decision& d);
  void propose_order(proto::mesh::JobOrdered e, const JobDesk::Done& done);
  void push_order(std::uint64_t job);
  // Why a suspended job cannot be thawed now ("" when it can).
  std::string resume_room(const MeshJob& j) const;
  // job_dependencies.cpp: the pending jobs whose dependencies are unmet, into blocked_; those
  // whose dependencies can never be met ended.
  void settle_dependencies();
  void push_start(std::uint64_t job, const std::string& node);
  // A start or an order to one node of a run, kept and sent again every kResendMs until that
  // node acknowledges it or the run it is for is over.
  void send_until_acked(std::uint64_t job, const std::string& node, proto::jobs::Message m);
  // job_orders.cpp: node's acknowledgement `a` of suspend or resume order `o`, committed.
  void record_freeze(const proto::jobs::JobOrder& o, const std::string& node, const proto::jobs::StartAck& a);
  void resend_unacked();
  // A committed cancel of a running job (its run's cancel_by), to every node of its run again
  // every kResendMs until it ends: also a cancel an earlier coordinator committed.
  void resend_cancels();
  void reconcile();
  // job_shares.cpp: a job a node reports that the log does not place there (a run across nodes
  // that ended or was requeued, any run over, a run placed elsewhere): that node is told to stop
  // it (again, until it stops reporting it).
  void release_shares(const NodeReport& n);
  // Whether a pending job may start again: no node reports it (`held`: the jobs fresh reports
  // list), and its last run, when it spanned nodes, has every node reporting freshly. A share
  // that gave its run back does not stop the script's node at once: no new run starts before
  // every node of the old one has let it go.
  bool shares_released(const MeshJob& j, const std::set<std::uint64_t>& held) const;
  // A cancel of a running job, to every node of its current run; false when none has reported.
  bool push_cancel(const MeshJob& j, const std::string& who);
  // A cancel of job j's current run by `who`, committed (CancelAsked), then pushed to its nodes
  // while this member leads; `after` (may be empty) gets the outcome and the job as it is then.
  void commit_cancel(const MeshJob& j, const std::string& who,
                     std::function<void(const Proposed&, const MeshJob*)> after);
  void job_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  void node_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  void remove_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);  // member_remove.cpp
  bool down(const std::string& node) const;                                         // member_remove.cpp
  void end_runs_on(const std::string& node, const std::string& who);                // member_remove.cpp
  void promote_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);  // voter_asks.cpp
  void handover_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);  // voter_asks.cpp
  void hand_over(std::vector<std::uint64_t> ids, std::size_t next, int tries, const JobDesk::Done& done);
  std::string name_of(std::uint64_t member) const;  // as heard ("member ID" if never)
  std::set<std::uint64_t> live_members() const;  // heard from within kNodeStaleMs and not stopping, this one too
  std::uint64_t member_of(const std::string& node) const;  // its raft id: as heard, else by its name
  void alloc_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  // The plan file's calendar with the replicated allocation changes over it (before a pass).
  void follow_allocations();
  void commit(const proto::mesh::Entry& e, std::uint64_t job, std::string message, const JobDesk::Done& done);
  // coordinator_grants.cpp, NCI charging: the configured grants into the log; before a pass,
  // each project's grant left (running jobs' charges so far counted); a Demote of the pass
  // (no grant left) moves its job in the log; the charge factor a start records.
  void follow_grants();
  void charge_view(Time now);
  void demote(const Decision& d);
  double start_charge(const MeshJob& j) const;
  // job_fit.cpp: leading, current, and long enough for every node up to have reported.
  bool settled() const;
  bool removed(const std::string& node) const;  // corral mesh remove'd
  std::string too_large(const proto::JobSpec& s) const;
  // Settled, and every node heard from reports freshly and is up: the plan's "can never run"
  // speaks for the whole mesh.
  bool whole_mesh_reports() const;
  // A pending job ends in the log (run 0) with `reason` and `why` in its comment: a Reject of
  // the plan, a dependency never met. Once: not while its end or start is being committed.
  void end_pending(std::uint64_t job, EndReason reason, const std::string& why);
  // job_waits.cpp: the room the nodes taking jobs have now, and what job j is short of.
  struct Free {
    std::int64_t cores = 0, mem_mb = 0;
    bool mem_known = false;
  };
  std::map<std::string, Free> free_room() const;
  std::string lacks(const MeshJob& j, const std::map<std::string, Free>& free) const;
  // job_arrays.cpp: tasks of each array handed to the pass a few at a time (TasksHanded): at most
  // kArrayWindow waiting, never more live than its %max_running; whether pending task j may be
  // offered to this pass (`room`: per array, the starts its limit still allows); an array's
  // cancel (its running tasks stopped, also by a new coordinator); a user's ID[INDEX] resolved
  // to the task's id (handed out ahead of its turn when it was not yet).
  void feed_arrays();
  bool task_room(const MeshJob& j, std::map<std::uint64_t, std::int64_t>& room) const;
  void cancel_array(const MeshJob& arr, const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);
  void stop_cancelled_task(const MeshJob& t);
  void task_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done);

  static constexpr std::uint64_t kResendMs = 500;      // a start, order or cancel not settled: sent again
  static constexpr std::uint64_t kNodeStaleMs = 3000;  // a node not heard from for this long: its report says nothing

  Env& env_;
  Consensus& c_;
  const MeshState& state_;
  std::string mesh_;
  SchedConfig sched_;
  pba::ProjectPlan plan_file_;                   // sched_.pba.plan before any change
  std::map<std::string, std::int32_t> allocations_;  // the changes laid over it
  std::vector<Queue> queues_;
  Push push_;
  PassWatch watch_;
  std::uint64_t term_ = 0;
  bool ready_ = false;
  std::uint64_t ready_at_ms_ = 0;              // when this term's barrier committed (Env ms)
  bool ticking_ = false;
  bool dirty_ = true;
  std::uint64_t seen_applied_ = 0;
  std::uint64_t next_decision_ = 0;
  std::uint64_t passes_ = 0;
  Planner planner_;                            // its buffers kept across passes
  Plan plan_;
  std::uint64_t next_reconcile_ = 0;
  std::set<std::uint64_t> proposing_;          // jobs whose start is being committed
  struct Unacked {
    std::uint64_t member = 0;                  // the node's member (0: not heard from yet)
    proto::jobs::Message msg;                  // a StartJob or a JobOrder
    std::uint64_t sent_ms = 0;
  };
  // By job, node and kind (false: its start, true: its order).
  std::map<std::tuple<std::uint64_t, std::string, bool>, Unacked> unacked_;
  std::uint64_t next_cancel_ms_ = 0;
  std::set<std::uint64_t> ordering_;           // jobs whose order is being committed
  std::set<std::uint64_t> feeding_;            // arrays whose tasks are being handed out
  std::set<std::uint64_t> blocked_;            // pending jobs waiting for others (this pass)
  std::uint64_t next_pass_ = 0;                // a pass at least then while jobs wait (Env ms)
  std::map<std::string, NodeReport> nodes_;    // by name
  std::set<std::string> heard_of_;             // every node heard of, its report current or not
  std::map<std::string, std::uint64_t> heard_ids_;  // their raft ids, by name
  std::vector<proto::mesh::GrantSet> grants_;  // configured
  std::uint64_t grants_term_ = 0;              // the term that proposed them
  std::map<std::uint64_t, std::string> demoted_;  // pending jobs moved by this pass or one before: queue
  VoterChange voters_{c_};                      // corral mesh promote / remove of a voter
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace corral::service
