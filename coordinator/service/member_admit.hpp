// The coordinator's side of members that do not vote: an agent that is not a
// voter says hello to every voter; the leader adds it to the raft
// configuration as a standby (it copies the log, so it answers reads from
// its own replica, and it never votes). One configuration change at a time,
// as raft requires; a member already in the configuration is left as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "coordinator/service/consensus.hpp"

namespace corral::service {

class MemberAdmit {
 public:
  // `log` says what was done or refused (on the loop's thread).
  MemberAdmit(Consensus& c, std::function<void(const std::string&)> log) : c_(c), log_(std::move(log)) {}
  ~MemberAdmit() { *alive_ = false; }

  // A hello heard from member `id` at `address` (the transport's address):
  // while this member leads, adds it as a standby unless it is in the
  // configuration already. An id the configuration holds at another address
  // is refused (two nodes with one id: their names collide), and so is a
  // node `removed` says was removed from the mesh: `tell` is called for it
  // at each of its hellos (id, address, name), so it stops the runs the mesh
  // ended when it removed the node.
  void heard(std::uint64_t id, const std::string& address, const std::string& name);
  using Tell = std::function<void(std::uint64_t, const std::string&, const std::string&)>;
  void set_removed(std::function<bool(const std::string&)> removed, Tell tell = {}) {
    removed_ = std::move(removed);
    tell_ = std::move(tell);
  }

 private:
  Consensus& c_;
  std::function<void(const std::string&)> log_;
  std::function<bool(const std::string&)> removed_;
  Tell tell_;
  bool busy_ = false;  // a configuration change is under way
  std::uint64_t refused_ = 0;  // the last id refused (logged once)
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace corral::service
