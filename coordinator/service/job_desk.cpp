#include "coordinator/service/job_desk.hpp"

namespace corral::service {

void JobDesk::accept(const proto::mesh::Entry& e, Done done) {
  if (!c_.is_leader()) {
    done(DeskAnswer{"not_leader", 0, c_.leader_id(), "", ""});
    return;
  }
  if (check_)
    if (std::string why = check_(e); !why.empty()) return done(DeskAnswer{"refused", 0, 0, std::move(why), "invalid"});
  c_.propose(proto::mesh::encode_entry(e), [done = std::move(done)](const Proposed& p) {
    switch (p.status) {
      case Status::ok:
        if (p.applied.ok) done(DeskAnswer{"ok", p.applied.value, 0, "", ""});
        else done(DeskAnswer{"refused", 0, 0, p.applied.reason, "invalid"});
        return;
      case Status::not_leader:
      case Status::leadership_lost:
        // The entry may still commit: a resend with the same token finds it.
        done(DeskAnswer{"not_leader", 0, 0, std::string(status_name(p.status)), ""});
        return;
      case Status::shutdown:
      case Status::error:
        done(DeskAnswer{"error", 0, 0, p.message.empty() ? std::string(status_name(p.status)) : p.message, ""});
        return;
    }
  });
}

}  // namespace corral::service
