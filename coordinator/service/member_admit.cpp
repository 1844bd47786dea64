#include "coordinator/service/member_admit.hpp"

#include <vector>


namespace corral::service {

void MemberAdmit::heard(std::uint64_t id, const std::string& address, const std::string& name) {
  if (busy_ || id == 0 || !c_.is_leader()) return;
  if (removed_ && removed_(name)) {
    if (refused_ != id)
      log_("mesh: refused member " + std::to_string(id) + " (" + name + ") at " + address +
           ": it was removed from the mesh (corral undrain " + name + " lets it in again)");
    refused_ = id;
    if (tell_) tell_(id, address, name);
    return;
  }
  const Member* known = nullptr;
  std::vector<Member> ms = c_.members();
  for (const Member& m : ms)
    if (m.id == id) known = &m;
  if (known && known->address != address) {
    if (refused_ != id)
      log_("mesh: refused member " + std::to_string(id) + " at " + address + ": that id is " + known->address +
           "'s (two nodes whose names give one id: rename one)");
    refused_ = id;
    return;
  }
  if (known && known->role != Role::spare) return;
  for (const Member& m : ms)
    if (m.id != id && m.address == address) {
      if (refused_ != id) log_("mesh: refused member " + std::to_string(id) + ": " + address + " is member " +
                               std::to_string(m.id) + "'s address");
      refused_ = id;
      return;
    }
  busy_ = true;
  auto standby = [this, id, address, alive = alive_](Status s) {
    if (!*alive) return;
    busy_ = false;
    if (s == Status::ok) log_("mesh: member " + std::to_string(id) + " at " + address + " joined (standby: it does not vote)");
  };
  if (known) {  // added earlier, its role not yet given (a leader lost in between)
    c_.assign(id, Role::standby, standby);
    return;
  }
  c_.add(Member{id, address, Role::spare}, [this, id, standby, alive = alive_](Status s) {
    if (!*alive) return;
    if (s != Status::ok) {
      busy_ = false;
      return;
    }
    c_.assign(id, Role::standby, standby);
  });
}

}  // namespace corral::service
