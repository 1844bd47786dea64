// A member's entries on their way into the mesh's log (submissions, job
// ends), on the mesh thread. Each goes to the coordinator this member knows
// (its own JobDesk when it leads, else a Forward over the mesh sockets) and is
// sent again until one answers that it is committed: a change of coordinator
// is not seen by the user. A submission keeps its token across resends, so it
// gets one id. With no coordinator answering within the wait, it fails with a
// clear message (a wait of 0: it is sent until it is committed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "coordinator/service/consensus.hpp"
#include "coordinator/service/env.hpp"
#include "coordinator/service/job_desk.hpp"
#include "proto/mesh_jobs.hpp"

namespace corral::agent {

struct SubmitResult {
  bool ok = false;
  std::uint64_t job = 0;
  std::string code;              // when not ok: unavailable | invalid
  std::string message;
};

class SubmitForwarder {
 public:
  using Send = std::function<void(std::uint64_t to, std::string bytes)>;
  using Done = std::function<void(const SubmitResult&)>;
  // The coordinator's answer to a cancel, when this member leads.
  using CancelDesk = std::function<void(const proto::jobs::CancelAsk&, service::JobDesk::Done)>;
  // `token_prefix` names this member's process (its submissions' tokens are
  // the prefix and a counter); `wait_ms` bounds each submission.
  SubmitForwarder(service::Env& env, service::Consensus& c, service::JobDesk& desk, std::string mesh,
                  Send send, std::string token_prefix, std::uint64_t wait_ms);
  void set_cancel_desk(CancelDesk d) { cancel_desk_ = std::move(d); }
  ~SubmitForwarder();

  void submit(proto::mesh::Entry e, Done done, bool bounded = true);
  // A cancel, answered as the coordinator decides (SubmitResult::message: the job's state).
  void cancel(proto::jobs::CancelAsk ask, Done done);
  void on_ack(const proto::jobs::ForwardAck& a);

 private:
  struct Pending {
    proto::mesh::Entry entry;
    proto::jobs::CancelAsk cancel;  // job 0: not a cancel
    Done done;
    std::uint64_t deadline = 0;
    std::uint64_t next_try = 0;  // when to send again (no answer yet)
    std::string last;            // the last refusal's reason, for the final message
  };
  void start(Pending p);
  void attempt(std::uint64_t key);
  void answer(std::uint64_t key, const service::DeskAnswer& a);
  void tick();

  service::Env& env_;
  service::Consensus& c_;
  service::JobDesk& desk_;
  std::string mesh_;
  Send send_;
  CancelDesk cancel_desk_;
  std::string token_prefix_;
  std::uint64_t wait_ms_;
  std::uint64_t next_key_ = 1, next_request_ = 1;
  std::map<std::uint64_t, Pending> pending_;           // by key
  std::map<std::uint64_t, std::uint64_t> requests_;    // request number -> key
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool ticking_ = false;
};

}  // namespace corral::agent
