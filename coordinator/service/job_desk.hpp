// The coordinator's desk for the entries members send it: a submission (a
// JobAccepted), a job's end, ... is proposed to the mesh and answered only
// once a majority holds it. A member that
// does not lead says so (and names the leader it knows), so the asker can go
// there instead. A resend of the same submission carries the same token and
// is answered with the first id (the state machine keeps the tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "coordinator/service/consensus.hpp"
#include "proto/mesh.hpp"

namespace corral::service {

struct DeskAnswer {
  std::string status;            // ok | not_leader | refused | error
  std::uint64_t job = 0;         // the job concerned (ok; a new job's id)
  std::uint64_t leader = 0;      // the leader this member knows (not_leader; 0: none)
  std::string message;
  std::string code;              // refused: not_found | permission | invalid
};

class JobDesk {
 public:
  using Done = std::function<void(const DeskAnswer&)>;
  // `c` outlives the desk.
  explicit JobDesk(Consensus& c) : c_(c) {}
  // `done` fires once: at once when this member does not lead, else when
  // the entry is committed and applied here or its fate is unknown
  // (leadership lost: not_leader, to be resent).
  void accept(const proto::mesh::Entry& e, Done done);
  // Why the leader refuses an entry before proposing it ("" to propose it).
  using Check = std::function<std::string(const proto::mesh::Entry&)>;
  void set_check(Check check) { check_ = std::move(check); }

 private:
  Consensus& c_;
  Check check_;
};

}  // namespace corral::service
