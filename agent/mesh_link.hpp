// corrald's link to the mesh: one member of the mesh's raft (RaftNode over
// ZeroMQ, its state in RaftFiles under the state directory) on a thread of
// its own that owns every mesh socket. The daemon's loop talks to it only
// through this class: status() copies the latest view under a lock; post()
// hands work to the mesh thread; results come back through a reply queue whose
// wake_fd() the daemon polls.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/mesh_keys.hpp"
#include "agent/mesh_submit.hpp"
#include "coordinator/schedule.hpp"
#include "coordinator/service/mesh_state.hpp"
#include "proto/mesh_jobs.hpp"
#include "proto/mesh_link.hpp"
#include "proto/proto.hpp"

namespace corral::agent {

struct MeshConfig {
  std::string name;                  // the mesh's name
  // host:port, the same order on every member: the voters a new mesh starts with, and where
  // a starting member first looks for the mesh; after that the raft configuration in the log
  // says who votes (corral mesh promote / remove).
  std::vector<std::string> voters;
  std::string node_name;
  std::string listen;                // host:port: one of voters, or a member's own (it does not vote)
  std::string dir;                   // raft files (created)
  MeshKeys keys;                     // CURVE on every mesh socket (unless keys.curve is false)
  std::string allowed_file;          // named in the log of a refusal
  bool fsync = true;
  std::uint64_t submit_wait_ms = 10000;  // a submission with no coordinator answering fails then
  SchedConfig sched;                 // the coordinator's pass, as a standalone corrald's
  std::vector<Queue> queues;
  std::vector<proto::mesh::GrantSet> grants;  // NCI: the plan file's `grant` lines, into the log
  // What the coordinator orders this node (a StartJob, a CancelJob), on the daemon's thread.
  std::function<void(const proto::jobs::Message&)> on_order;
  // A job ended in the replicated state this member applied (`corral wait`), on the daemon's
  // thread; only while watch_ends(true).
  std::function<void(std::uint64_t job)> on_ended;
  // The coordinator (node `by`) refused this member: the mesh removed its node
  // (proto::link::Removed), on the daemon's thread, at each refused hello.
  std::function<void(const std::string& by)> on_removed;
};

class MeshLink {
 public:
  // Loads the raft files (a damaged one: std::runtime_error naming it and
  // the offset), binds `listen`, and starts the mesh thread. Throws
  // std::runtime_error with a clear message when any of it fails.
  explicit MeshLink(MeshConfig cfg);
  ~MeshLink();
  MeshLink(const MeshLink&) = delete;
  MeshLink& operator=(const MeshLink&) = delete;

  // The latest view of the mesh (refreshed by the mesh thread as it runs).
  proto::MeshStatus status() const;
  const MeshConfig& config() const { return cfg_; }

  // Jobs through the mesh. `done` runs on the daemon's thread (run_replies()).
  // propose(): once the mesh committed the entry (a JobAccepted: the new id),
  // or why not, after at most submit_wait_ms (unbounded: sent until it is
  // committed). jobs(): the replicated jobs as this member applied them (one,
  // an array followed by its tasks handed out, or every job when `id` is 0).
  void propose(proto::mesh::Entry e, std::function<void(const SubmitResult&)> done, bool bounded = true);
  // A user's cancel, through the coordinator (SubmitResult::message: the job's state).
  void cancel(proto::jobs::CancelAsk ask, std::function<void(const SubmitResult&)> done);
  void jobs(std::uint64_t id, std::function<void(std::vector<service::MeshJob>)> done);
  // The nodes of run `run` of `job` as this member's replica has it, once it has applied that
  // run's start (a node may start a run before its replica applies it), waiting at most
  // kRunWaitMs; empty when the run is not the job's current one.
  void run_nodes(std::uint64_t job, std::int32_t run, std::function<void(std::vector<std::string>)> done);
  // The whole replicated state as this member applied it (`corral alloc`).
  void data(std::function<void(service::MeshData)> done);
  // Every node as this member sees the mesh (`corral nodes`): the reports it follows and the
  // replicated admin states and running jobs.
  void nodes(std::function<void(std::vector<proto::NodeLine>)> done);

  // Why pending jobs wait and their planned starts, from the coordinator's last pass (`corral
  // stat`): asked of the coordinator, which may be this member; `done` gets what it answered
  // within kWaitAskMs, or nothing.
  void waits(std::vector<std::uint64_t> jobs, std::function<void(std::vector<proto::jobs::JobWait>)> done);

  // Whether on_ended is called (someone waits for a job).
  void watch_ends(bool on) { watching_.store(on, std::memory_order_relaxed); }

  // This node as it publishes it (its node and jobs events, agent/mesh_feed.hpp).
  void set_node(int cores, std::int64_t mem_mb, std::int64_t jobfs_mb, std::vector<std::uint64_t> running);
  // A start's acknowledgement, to the coordinator that sent it (member `to`).
  void start_ack(std::uint64_t to, proto::jobs::StartAck a);

  // A jobs message to another member (or this one: then to on_order), its `mesh` and `from`
  // filled in. send_node() finds the member by its node name (a voter by its heartbeats, a member
  // that does not vote by its name's id in the raft configuration); `unknown` runs on the
  // daemon's thread when no member has that name. Both may be called from any thread.
  void send_member(std::uint64_t to, proto::jobs::Message m);
  void send_node(const std::string& node, proto::jobs::Message m, std::function<void()> unknown);

  // Runs `fn` on the mesh thread (soon; never inline). Any thread may call it.
  void post(std::function<void()> fn);
  // Readable when replies wait: the daemon then calls run_replies().
  int wake_fd() const { return reply_fd_; }
  // Called on the mesh thread: `fn` runs on the daemon's thread at its next run_replies().
  void reply(std::function<void()> fn);
  void run_replies();

  struct Member;  // the mesh thread's objects (mesh_link.cpp)

 private:
  void thread_main();
  void start_curve();
  void publish_status();  // on the mesh thread
  void tick();            // every 200 ms on the mesh thread: heartbeat, subscriptions, hello
  void on_link(std::string_view bytes);  // a link message of the request channel
  void ask_snapshot(std::uint64_t publisher);
  void answer_snapshot(const proto::link::SnapshotAsk& a);
  void on_jobs_message(std::string_view bytes);
  void send_to(std::uint64_t id, std::string bytes);
  std::string address_of(std::uint64_t id) const;  // "tcp://host:port", or "" (unknown)
  void deliver(std::uint64_t to, proto::jobs::Message m);  // on the mesh thread
  void await_run(std::uint64_t job, std::int32_t run, std::function<void(std::vector<std::string>)> done,
                 std::uint64_t left_ms);  // on the mesh thread
  std::uint64_t member_named(const std::string& node) const;

  MeshConfig cfg_;
  std::unique_ptr<Member> m_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> watching_{false};
  mutable std::mutex mu_;
  proto::MeshStatus status_;
  struct OwnNode {
    std::int32_t cores = 0;
    std::int64_t mem_mb = 0, jobfs_mb = 0;
    std::vector<std::uint64_t> running;
  };
  OwnNode node_;                     // this node as set_node() last said (under mu_)
  std::deque<std::function<void()>> inbox_, replies_;
  int reply_fd_ = -1;                // eventfd
  std::thread thread_;
};

// Checks the mesh keys of a config: a name, 3 or 5 voters, a listen address,
// a node name for a member that does not vote. Returns "" or what is wrong.
std::string check_mesh_config(const MeshConfig& cfg);

// A member's raft id at its first start: a first voter's place in voters (from 1); any other
// member, proto::link::member_id_of its node name (node names must differ: the coordinator
// refuses an id it holds at another address). The id is then kept in the raft directory
// (`id`): a member promoted to voter keeps it.
std::uint64_t mesh_member_id(const MeshConfig& cfg);

}  // namespace corral::agent
