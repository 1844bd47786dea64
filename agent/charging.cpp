// NCI charging in the live agent (nci-pbs-policy.txt "Charging"): a job is
// charged service units as it runs (running wall time x its cpus x its queue's
// charge; suspended time is free), by the core's Ledger (coordinator/nci),
// kept durable in state_dir/ledger (ledger_book.hpp). The grants of the plan
// file's `grant` lines are checked before every pass: a project with none left
// has its pending jobs moved to the bonus queue by nci_stage. `corral report`
// is the weekly per-project report of `corral sim --report`, built and
// rendered by the same functions (coordinator/nci/report.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <tuple>
#include <set>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "coordinator/pba/allocation_use.hpp"
#include "coordinator/service/mesh_charges.hpp"
#include "coordinator/nci/report.hpp"
#include "coordinator/pba/calendar.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {

Job charged_job(const JobRecord& rec) {
  Job j;
  j.id = rec.id;
  j.user = rec.user;
  j.project = rec.spec.project;
  j.queue = rec.spec.queue;
  return j;
}

// `corral report --week W`: a week number as the report prints it (0: the week charging began)
// or an ISO week (2026-W48); a week that has not begun or lies before week 0 is refused.
std::int64_t report_week(const std::string& text, const Ledger& l, std::int64_t current, std::string& why) {
  const std::string iso_now = pba::format_iso_week(pba::iso_week(l.week_start(current)));
  const std::string iso_0 = pba::format_iso_week(pba::iso_week(l.week_start(0)));
  const std::string shown = "'" + proto::printable(text.substr(0, 64)) + "'";
  std::int64_t w = 0;
  if (!text.empty() && text.size() <= 18 && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    w = std::stoll(text);
  } else if (auto iso = pba::parse_iso_week(text)) {
    w = l.week_of(pba::week_start(*iso));
  } else {
    why = "--week " + shown + ": expected a week number (0 is " + iso_0 + ", when charging began; this is week " +
          std::to_string(current) + ") or an ISO week such as " + iso_now;
    return -1;
  }
  if (w < 0) why = "--week " + shown + ": before charging began (week 0 is " + iso_0 + ")";
  else if (w > current)
    why = "--week " + shown + ": has not begun (this is week " + std::to_string(current) + ", " + iso_now + ")";
  return why.empty() ? w : -1;
}

}  // namespace

// nci = yes: the ledger, and the grants of nci_plan (else pba_plan).
void Daemon::setup_charging() {
  if (!cfg_.nci) return;
  const Time t = static_cast<Time>(now());
  book_ = std::make_unique<LedgerBook>(cfg_.state_dir, cfg_.fsync, cfg_.recover, snapshot_queues(), t);
  book_->set_keep([this](std::uint64_t id) { return store_->find(id) != nullptr; });
  const LedgerLoad& lr = book_->load_report();
  log_line("NCI: charge ledger " + book_->path() + ": " + std::to_string(lr.entries) + " entries, week 0 is " +
           pba::format_iso_week(pba::iso_week(book_->origin())));
  if (!lr.warning.empty()) log_line("warning: " + lr.warning);
  const std::string key = cfg_.nci_plan.empty() ? "pba_plan" : "nci_plan";
  const std::string& path = cfg_.nci_plan.empty() ? cfg_.pba_plan : cfg_.nci_plan;
  if (path.empty()) {
    log_line("NCI: no grants (no nci_plan or pba_plan): jobs are charged, no project is moved to " +
             sched_.nci.bonus_queue);
    return;
  }
  const pba::ProjectPlan plan = read_plan(key, path, sched_.pba.enabled ? pba_origin() : book_->origin());
  for (const pba::Grant& g : plan.grants) {
    book_->ledger().set_grant_every(g.project, g.su, g.period);
    grants_.push_back(proto::mesh::GrantSet{g.project, "", g.su, g.period});
  }
  log_line("NCI: " + std::to_string(plan.grants.size()) + " grant(s) from " + key + " " + path);
}

void Daemon::charge_job(const JobRecord& rec, double t, bool close) {
  if (!book_ || rec.start_time <= 0) return;
  const Time ran = charged_seconds(rec.start_time, t, suspended_total(rec, t));
  try {
    book_->charge(charged_job(rec), rec.start_time, ran, granted(rec), static_cast<Time>(t), close);
  } catch (const std::invalid_argument& e) {
    if (uncharged_.insert(rec.id).second) log_line("job " + std::to_string(rec.id) + ": not charged: " + e.what());
  }
}

void Daemon::charge_running(double t) {
  if (!book_) return;
  for (auto id : active_) charge_job(store_->jobs().at(id), t, false);
}

// Before the journal (commit_and_reply): a full disk is logged once and retried, as the journal's.
void Daemon::flush_ledger(bool sync) {
  if (!book_) return;
  try {
    book_->flush(sync);
    if (ledger_full_) log_line("state disk has room again: charges written");
    ledger_full_ = false;
  } catch (const StoreFull& e) {
    if (!ledger_full_) log_line(std::string("state disk full: ") + e.what());
    ledger_full_ = true;
    need_sync_ = true;
  }
}

// stat: units charged over every run, and what an hour of running costs.
void Daemon::charge_info(const JobRecord& rec, proto::JobInfo& j) const {
  if (!book_) return;
  if (const JobCharge* c = book_->job(rec.id)) j.su_charged = c->su;
  if (rec.ended()) return;
  try {
    j.su_rate = book_->ledger().charge_factor(charged_job(rec)) * granted(rec);
  } catch (const std::invalid_argument&) {  // a queue no longer configured: not charged
  }
}

namespace {

// The report of r.week (default: the current one) from ledger `l` at `t`, for a standalone node
// and a mesh alike: `current` gives this week's running and pending jobs, `projects` the
// projects jobs name, `plan` the PBA calendar (nullptr: none).
proto::Message report_answer(const proto::ReportReq& r, const Ledger& l, double t, const std::function<Snapshot()>& current,
                             std::set<std::string> known, const pba::ProjectPlan* plan) {
  const std::int64_t now_week = l.week_of(static_cast<Time>(t));
  std::int64_t week = now_week;
  if (!r.week.empty()) {
    std::string why;
    week = report_week(r.week, l, now_week, why);
    if (!why.empty()) return proto::ErrorRep{"invalid", why};
  }
  // A past week is shown as it ended: its charges, no running or pending jobs.
  Snapshot s;
  if (week == now_week) s = current();
  else s.now = l.week_start(week + 1);
  std::map<std::string, double> alloc;
  if (plan)
    for (const auto& p : plan->projects) alloc[p.name] = plan->allocated_slots(p.name, l.week_start(week));
  NciReport rep = build_report(l, s, week, alloc);
  if (!r.project.empty()) {
    for (const auto& [k, su] : l.totals().charged) known.insert(k.first);
    for (const auto& [p, left] : l.grants_left(static_cast<Time>(t))) known.insert(p);
    for (const auto& [p, a] : alloc) known.insert(p);
    known.erase("");
    if (!known.count(r.project)) {
      std::string names;
      for (const auto& p : known) names += (names.empty() ? "" : ", ") + proto::printable(p);
      return proto::ErrorRep{"not_found", "--project '" + proto::printable(r.project.substr(0, 64)) +
                                              "': no grant, charge or job names it (projects here: " +
                                              (names.empty() ? "none" : names) + ")"};
    }
    std::erase_if(rep.projects, [&](const ReportRow& x) { return x.project != r.project; });
    std::erase_if(rep.users, [&](const ReportRow& x) { return x.project != r.project; });
    if (rep.projects.empty()) {  // known, nothing that week: its row of zeros and its grant
      ReportRow x;
      x.project = r.project;
      if (auto a = alloc.find(r.project); a != alloc.end()) x.allocation = a->second;
      x.subscription = -x.allocation;
      x.has_grant = l.has_grant(r.project, std::min(s.now, l.week_start(week + 1) - 1));
      x.grant_left = l.grant_left(r.project, std::min(s.now, l.week_start(week + 1) - 1));
      rep.projects.push_back(x);
    }
  }
  return proto::ReportRep{r.json ? render_report_json(rep) : render_report_table(rep)};
}

// What the report counts of the mesh's jobs now: the running ones (their cpus) and the pending.
Snapshot mesh_report_jobs(const service::MeshData& d, Time t) {
  Snapshot s;
  s.now = t;
  for (const auto& [id, m] : d.jobs) {
    if (m.state == proto::state::kEnded) continue;
    Job j;
    j.id = id;
    j.user = m.user;
    j.project = m.spec.project;
    j.queue = m.spec.queue;
    std::tie(j.slots_min, j.slots_max) = slot_range(m.spec);
    if (m.state == proto::state::kPending) {
      s.pending.push_back(std::move(j));
      continue;
    }
    RunningJob rj;
    rj.job = std::move(j);
    rj.suspended = m.state == proto::state::kSuspended;
    rj.slots = service::run_cpus(m, m.runs.back());
    s.running.push_back(std::move(rj));
  }
  return s;
}

const char* const kNoCharging =
    "no service units are charged here: corral report needs nci = yes in corrald's configuration";

}  // namespace

proto::Message Daemon::on_report(const Peer&, const proto::ReportReq& r) {
  if (!book_) return proto::ErrorRep{"invalid", kNoCharging};
  const double t = now();
  charge_running(t);
  std::set<std::string> projects;
  for (const auto& [id, rec] : store_->jobs()) projects.insert(rec.spec.project);
  return report_answer(r, book_->ledger(), t, [&] { return snapshot(static_cast<Time>(t)); }, std::move(projects),
                       sched_.pba.enabled ? &sched_.pba.plan : nullptr);
}

// Through the mesh: the whole mesh's charges from the replicated state this member applied, the
// same report on any member and after any failover.
void Daemon::mesh_report(Client& c, const proto::ReportReq& r) {
  if (!cfg_.nci) return send(c, proto::ErrorRep{"invalid", kNoCharging});
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->data([this, fd = c.fd, ticket, r](service::MeshData d) {
    const double t = now();
    const Ledger l = service::mesh_ledger(d, static_cast<Time>(t));
    std::set<std::string> projects;
    for (const auto& [id, m] : d.jobs) projects.insert(m.spec.project);
    pba::ProjectPlan plan = sched_.pba.plan;
    if (sched_.pba.enabled) pba::overlay_allocations(plan, d.allocations);
    mesh_answer(fd, ticket,
                report_answer(r, l, t, [&] { return mesh_report_jobs(d, static_cast<Time>(t)); }, std::move(projects),
                              sched_.pba.enabled ? &plan : nullptr));
  });
}

}  // namespace corral::agent
