// Corral's own small consensus interface: a replicated log whose committed
// entries every member applies, in order, to its StateMachine, and one leader
// (the coordinator) that alone may propose.
//
// Everything runs on one thread, the loop that drives the implementation (see
// env.hpp): callbacks fire from that loop, never from inside the call that
// registered them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace corral::service {

// What the state machine made of one committed entry.
struct Applied {
  bool ok = false;
  std::string reason;          // why the entry was refused
  std::uint64_t value = 0;     // e.g. the id an accepted job received
};

// The application's replicated state. apply() must be deterministic and must
// not throw: a refused entry is an Applied{false, reason}, never an error of
// the log (libraft stops a replica whose apply fails).
class StateMachine {
 public:
  virtual ~StateMachine() = default;
  virtual Applied apply(std::uint64_t index, std::string_view entry) = 0;
  virtual std::string snapshot() const = 0;
  // Replaces the whole state. Returns false (state unchanged) on bad bytes.
  virtual bool restore(std::string_view bytes) = 0;
};

enum class Role { voter, standby, spare };  // standby: replicates, does not vote

struct Member {
  std::uint64_t id = 0;        // > 0, unique in the mesh
  std::string address;         // transport address
  Role role = Role::voter;
};

enum class Status {
  ok,
  not_leader,                  // proposals go to the leader (see leader())
  leadership_lost,             // the entry may or may not commit: ask again after a barrier
  shutdown,
  error,
};
std::string_view status_name(Status s);

struct Proposed {
  Status status = Status::error;
  std::uint64_t index = 0;     // log index of the entry (when it was appended)
  Applied applied;             // this member's apply result (status ok)
  std::string message;         // detail for an error
};

class Consensus {
 public:
  using ProposeCb = std::function<void(const Proposed&)>;
  using DoneCb = std::function<void(Status)>;
  // (leader?, term): fired when this member becomes leader or stops being it.
  using LeadershipCb = std::function<void(bool, std::uint64_t)>;

  virtual ~Consensus() = default;

  // Appends `entry` when this member leads; `cb` fires once it is committed
  // and applied here, or with the reason it was not.
  virtual void propose(std::string entry, ProposeCb cb) = 0;
  // Commits an empty entry: once `cb` fires with ok, every entry of earlier
  // terms is applied here. A new leader calls it before deciding anything.
  virtual void barrier(DoneCb cb) = 0;

  virtual void on_leadership(LeadershipCb cb) = 0;
  virtual bool is_leader() const = 0;
  virtual std::uint64_t id() const = 0;
  virtual std::uint64_t leader_id() const = 0;  // 0: none known
  virtual std::uint64_t term() const = 0;
  virtual std::uint64_t commit_index() const = 0;
  virtual std::uint64_t last_applied() const = 0;

  // Membership (leader only): add as spare, then assign a role; remove.
  virtual std::vector<Member> members() const = 0;
  virtual void add(const Member& m, DoneCb cb) = 0;
  virtual void assign(std::uint64_t id, Role role, DoneCb cb) = 0;
  virtual void remove(std::uint64_t id, DoneCb cb) = 0;
  // Leader only: hands the leadership to voter `id` (0: the voter most up to
  // date). `cb` fires with ok once `id` leads or an election timeout has
  // passed: leader_id() then says whether it took over.
  virtual void transfer(std::uint64_t id, DoneCb cb) = 0;
};

}  // namespace corral::service
