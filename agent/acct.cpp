// `corral acct`: every ended job and its runs, as Slurm's sacct. A standalone node reads them
// from its journal (the ended jobs it keeps, keep_ended) and their service units from its
// ledger; a mesh member from the replicated state it applied (each run charged there as its end
// applied), so the list and its units survive the loss of any coordinator.
#include <algorithm>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "coordinator/names.hpp"
#include "coordinator/pba/calendar.hpp"
#include "coordinator/service/mesh_charges.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {

// --since T: a duration back from `now` (the project's duration grammar) or the start of an ISO
// week; "" is everything. Returns -1 with `why` set when T is neither.
double since_time(const std::string& text, double now, std::string& why) {
  if (text.empty()) return 0;
  if (auto d = find_duration(text)) return now - static_cast<double>(*d);
  if (auto w = pba::parse_iso_week(text)) return static_cast<double>(pba::week_start(*w));
  why = "--since '" + proto::printable(text.substr(0, 64)) + "': expected a duration back from now (" +
        std::string(kDurationGrammar) + ") or an ISO week such as " +
        pba::format_iso_week(pba::iso_week(static_cast<Time>(now)));
  return -1;
}

bool wanted(const proto::AcctReq& r, const proto::AcctJob& j, double since) {
  return (r.user.empty() || j.user == r.user) && (r.project.empty() || j.project == r.project) &&
         j.end >= since;
}

void add_node(proto::AcctJob& j, const std::string& node) {
  if (std::find(j.nodes.begin(), j.nodes.end(), node) == j.nodes.end()) j.nodes.push_back(node);
}

proto::AcctJob acct_of(const service::MeshJob& m, Time now) {
  proto::AcctJob j;
  j.id = m.id;
  j.name = m.spec.name;
  j.user = m.user;
  j.project = m.spec.project;
  j.queue = m.spec.queue;
  j.submit = m.submit_time;
  j.end_reason = m.end_reason;
  j.exit_code = m.exit_code;
  j.cpus = slot_range(m.spec).first;
  j.su_charged = service::job_su(m, now);
  std::int32_t n = 0;
  for (const service::MeshRun& r : m.runs) {
    j.runs.push_back(proto::AcctRun{++n, r.nodes, r.start, r.end, r.end_reason, r.exit_code});
    for (const auto& node : r.nodes) add_node(j, node);
  }
  if (!m.runs.empty()) j.start = m.runs.front().start;
  j.end = m.end_time > 0 ? m.end_time : !m.runs.empty() ? m.runs.back().end : m.submit_time;
  return j;
}

}  // namespace

proto::Message Daemon::on_acct(const Peer&, const proto::AcctReq& r) {
  std::string why;
  const double since = since_time(r.since, now(), why);
  if (!why.empty()) return proto::ErrorRep{"invalid", why};
  proto::AcctRep rep;
  rep.since = since;
  for (const auto& [id, rec] : store_->jobs()) {
    if (!rec.ended()) continue;
    proto::AcctJob j;
    j.id = id;
    j.name = rec.spec.name;
    j.user = rec.user;
    j.project = rec.spec.project;
    j.queue = rec.spec.queue;
    j.submit = rec.submit_time;
    j.end = rec.end_time > 0 ? rec.end_time : rec.submit_time;
    j.end_reason = rec.end_reason;
    j.exit_code = rec.exit_code;
    j.cpus = granted(rec);
    if (book_)
      if (const JobCharge* c = book_->job(id)) j.su_charged = c->su;
    std::int32_t n = 0;
    for (const proto::RunInfo& run : rec.runs)
      j.runs.push_back(proto::AcctRun{++n, {node_name()}, run.start, run.end, run.end_reason, run.exit_code});
    if (!j.runs.empty()) {
      j.start = j.runs.front().start;
      j.nodes = {node_name()};
    }
    if (wanted(r, j, since)) rep.jobs.push_back(std::move(j));
  }
  return rep;
}

void Daemon::mesh_acct(Client& c, const proto::AcctReq& r) {
  std::string why;
  const double since = since_time(r.since, now(), why);
  if (!why.empty()) return send(c, proto::ErrorRep{"invalid", why});
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->jobs(0, [this, fd = c.fd, ticket, r, since](std::vector<service::MeshJob> jobs) {
    proto::AcctRep rep;
    rep.since = since;
    for (const service::MeshJob& m : jobs) {
      if (m.state != proto::state::kEnded) continue;
      proto::AcctJob j = acct_of(m, static_cast<Time>(now()));
      if (wanted(r, j, since)) rep.jobs.push_back(std::move(j));
    }
    mesh_answer(fd, ticket, rep);
  });
}

}  // namespace corral::agent
