// `corral alloc`: the PBA allocation calendar week by week up to the plan's horizon, with what
// each project used, and `corral alloc set` (root or an operator). A standalone node keeps its
// changes in state_dir/allocations (laid over the plan file at every start); in a mesh each
// change is a replicated entry the coordinator lays over its plan before its next pass.
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "agent/daemon.hpp"
#include "agent/durable_file.hpp"
#include "agent/job_accounting.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "coordinator/pba/allocation_use.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {

const char* const kNoCalendar =
    "no allocation calendar here: corral alloc needs pba = yes and a pba_plan in corrald's configuration";

std::string alloc_key(const proto::AllocSetting& s) { return s.project + "/" + s.week; }

proto::AllocRep calendar_rep(const pba::ProjectPlan& plan, const std::vector<pba::SlotUse>& uses, Time now) {
  proto::AllocRep rep;
  rep.current_week = pba::format_iso_week(pba::iso_week(now));
  rep.horizon_weeks = plan.horizon_weeks;
  for (const pba::WeekUse& w : pba::allocation_calendar(plan, uses, now))
    rep.weeks.push_back(proto::AllocLine{pba::format_iso_week(w.week), w.project, w.allocated, w.slot_hours, w.avg_slots});
  return rep;
}

std::vector<pba::SlotUse> mesh_uses(const service::MeshData& d) {
  std::vector<pba::SlotUse> out;
  for (const auto& [id, j] : d.jobs)
    for (const service::MeshRun& r : j.runs)
      out.push_back(pba::SlotUse{j.spec.project, slot_range(j.spec).first, static_cast<Time>(r.start),
                                 static_cast<Time>(r.end)});
  return out;
}

}  // namespace

// The changes as given, checked against `plan` (which gets them): the week spelled as ISO
// weeks are printed, none before this one. Returns an error text, or "".
std::string Daemon::check_alloc_set(pba::ProjectPlan& plan, std::vector<proto::AllocSetting>& set) const {
  const Time t = static_cast<Time>(now());
  for (proto::AllocSetting& s : set) {
    std::string err;
    auto week = pba::parse_iso_week(s.week, &err);
    if (!week) return "week '" + proto::printable(s.week.substr(0, 32)) + "': " + err;
    if (pba::week_index(*week) < pba::week_index(t))
      return "week " + pba::format_iso_week(*week) + " has ended; only this week (" +
             pba::format_iso_week(pba::iso_week(t)) + ") and later ones change";
    s.week = pba::format_iso_week(*week);
    pba::Allocation a;
    a.project = s.project;
    a.week = *week;
    a.slots = s.slots;
    if (auto why = pba::set_allocation(plan, std::move(a), t)) return proto::printable(*why);
  }
  return "";
}

// state_dir/allocations: "PROJECT WEEK SLOTS" lines, the changes made with corral alloc set.
void Daemon::load_allocations() {
  const std::string path = cfg_.state_dir + "/allocations";
  if (::access(path.c_str(), F_OK) != 0) return;
  std::istringstream in(durable::read_file(path));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream words(line);
    proto::AllocSetting s;
    std::string extra;
    if (!(words >> s.project >> s.week >> s.slots) || (words >> extra))
      throw std::runtime_error(path + " line " + std::to_string(n) + ": expected PROJECT WEEK SLOTS, got '" +
                               proto::printable(line.substr(0, 80)) + "'");
    alloc_changes_[alloc_key(s)] = s.slots;
  }
  pba::overlay_allocations(sched_.pba.plan, alloc_changes_);
  log_line("PBA: " + std::to_string(alloc_changes_.size()) + " allocation change(s) from " + path);
}

proto::Message Daemon::on_alloc(const Peer& p, const proto::AllocReq& r) {
  if (!sched_.pba.enabled) return proto::ErrorRep{"invalid", kNoCalendar};
  if (!r.set.empty()) {
    if (!p.admin) return proto::ErrorRep{"permission", "only " + admins() + " may change allocations"};
    pba::ProjectPlan plan = sched_.pba.plan;
    std::vector<proto::AllocSetting> set = r.set;
    if (std::string why = check_alloc_set(plan, set); !why.empty()) return proto::ErrorRep{"invalid", why};
    std::map<std::string, std::int32_t> changes = alloc_changes_;
    std::string text;
    for (const auto& s : set) changes[alloc_key(s)] = s.slots;
    for (const auto& [key, slots] : changes) {
      const auto slash = key.rfind('/');
      text += key.substr(0, slash) + " " + key.substr(slash + 1) + " " + std::to_string(slots) + "\n";
    }
    try {
      durable::replace_file(cfg_.state_dir, cfg_.state_dir + "/allocations", text, cfg_.fsync);
    } catch (const std::exception& e) {
      return proto::ErrorRep{"internal", std::string("allocations not changed: ") + e.what()};
    }
    alloc_changes_ = std::move(changes);
    sched_.pba.plan = std::move(plan);
    dirty_ = true;  // the next pass sees the new calendar
    for (const auto& s : set)
      log_line("allocation of " + s.project + " for " + s.week + " set to " + std::to_string(s.slots) + " slot(s) by " +
               (user_name(p.uid).empty() ? std::to_string(p.uid) : user_name(p.uid)));
  }
  const double t = now();
  std::vector<pba::SlotUse> uses;
  for (const auto& [id, rec] : store_->jobs()) {
    for (const proto::RunInfo& run : rec.runs)
      uses.push_back(pba::SlotUse{rec.spec.project, granted(rec), static_cast<Time>(run.start), static_cast<Time>(run.end)});
    if ((rec.state == proto::state::kRunning || rec.state == proto::state::kSuspended) && rec.start_time > 0)
      uses.push_back(pba::SlotUse{rec.spec.project, granted(rec), static_cast<Time>(rec.start_time), 0});
  }
  return calendar_rep(sched_.pba.plan, uses, static_cast<Time>(t));
}

// Through the mesh: the calendar as this member applied the replicated changes, over its own
// copy of the plan file; a change goes to the coordinator and is answered once committed.
void Daemon::mesh_alloc(Client& c, const proto::AllocReq& r) {
  if (!sched_.pba.enabled) return send(c, proto::ErrorRep{"invalid", kNoCalendar});
  std::vector<proto::AllocSetting> set = r.set;
  if (!set.empty()) {
    if (!c.peer.admin)  // also checked by the coordinator: refused here without a round trip
      return send(c, proto::ErrorRep{"permission", "only " + admins() + " may change allocations"});
    pba::ProjectPlan plan = sched_.pba.plan;
    if (std::string why = check_alloc_set(plan, set); !why.empty()) return send(c, proto::ErrorRep{"invalid", why});
  }
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  auto answer = [this, fd = c.fd, ticket](std::vector<proto::AllocSetting> done) {
    mesh_->data([this, fd, ticket, done](service::MeshData d) {
      for (const auto& s : done) d.allocations[alloc_key(s)] = s.slots;  // committed; maybe not applied here yet
      pba::ProjectPlan plan = sched_.pba.plan;
      pba::overlay_allocations(plan, d.allocations);
      mesh_answer(fd, ticket, calendar_rep(plan, mesh_uses(d), static_cast<Time>(now())));
    });
  };
  if (set.empty()) return answer({});
  proto::jobs::CancelAsk ask = mesh_ask(c.peer, "alloc_set");
  for (const auto& s : set) ask.allocs.push_back(proto::mesh::AllocationSet{s.project, s.week, s.slots});
  mesh_->cancel(std::move(ask), [this, fd = c.fd, ticket, set, answer](const SubmitResult& res) {
    if (res.ok) answer(set);
    else mesh_answer(fd, ticket, proto::ErrorRep{res.code, res.message});
  });
}

}  // namespace corral::agent
