#include "agent/ledger_book.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>

#include <msgpack.hpp>

#include "agent/durable_file.hpp"
#include "agent/journal_format.hpp"
#include "coordinator/pba/calendar.hpp"

namespace corral::agent {

// Named rather than anonymous: LedgerBook::Entry holds these, and a member of an anonymous
// namespace's type in a class with linkage is an error (-Wsubobject-linkage) in unity builds.
namespace ledger_rows {

// A (name, period or week) figure of the ledger's totals.
struct Row {
  std::string name;
  std::int64_t key = 0;
  double su = 0;
  double cpu_seconds = 0;
  MSGPACK_DEFINE(name, key, su, cpu_seconds)
};

struct JobRow {
  std::uint64_t id = 0;
  double run_start = 0;
  std::int64_t run_seconds = 0;
  bool closed = false;
  double su = 0;
  std::int64_t seconds = 0;
  MSGPACK_DEFINE(id, run_start, run_seconds, closed, su, seconds)
};

// Entries past which the file is rewritten as one base entry.
constexpr std::size_t kCompactAfter = 4096;

}  // namespace ledger_rows

using namespace ledger_rows;

// One entry of the file (map keys: a later field is added without breaking older files).
struct LedgerBook::Entry {
  std::string op;                   // "base" | "charge"
  // charge: job's run from run_start has run `seconds` in all by `at`, at `factor` SU/cpu-hour
  std::uint64_t job = 0;
  std::string project, user, queue;
  std::int32_t cpus = 0;
  double factor = 0;
  double run_start = 0;
  std::int64_t seconds = 0;
  bool close = false;
  std::int64_t at = 0;
  // base: the origin and everything charged until the compaction
  std::int64_t origin = 0;
  std::int64_t latest_at = 0;
  std::vector<Row> grant, charged, project_weeks, user_weeks;
  std::vector<std::pair<std::string, std::string>> user_projects;
  std::vector<JobRow> jobs;
  CORRAL_MSGPACK_MAP(op, job, project, user, queue, cpus, factor, run_start, seconds, close, at, origin,
                     latest_at, grant, charged, project_weeks, user_weeks, user_projects, jobs)
};

namespace {

// The entry at `pos` and its framed size, else 0 (a frame that does not verify, or an entry of
// no known kind).
template <class E>
std::size_t entry_at(std::string_view data, std::size_t pos, E& out) {
  std::string_view p;
  const std::size_t n = journal::frame_at(data, pos, p);
  if (!n) return 0;
  try {
    msgpack::object_handle oh = msgpack::unpack(p.data(), p.size());
    E e;
    oh.get().convert(e);
    if (e.op != "base" && e.op != "charge") return 0;
    out = std::move(e);
  } catch (const std::exception&) {
    return 0;
  }
  return n;
}

template <class E>
std::string encode(const E& e) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, e);
  return journal::frame(std::string_view(buf.data(), buf.size()));
}

}  // namespace

LedgerBook::LedgerBook(std::string dir, bool fsync, bool recover, std::vector<Queue> queues, Time now)
    : dir_(std::move(dir)), path_(dir_ + "/ledger"), fsync_(fsync), queues_(std::move(queues)) {
  load(recover, now);
}

LedgerBook::~LedgerBook() {
  try {
    flush(true);
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
}

const JobCharge* LedgerBook::job(std::uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void LedgerBook::load(bool recover, Time now) {
  ::unlink((path_ + ".new").c_str());  // a compaction cut short: never used
  const std::string data = durable::read_file(path_);
  std::vector<Entry> good;
  std::size_t pos = 0, torn_at = std::string::npos, damaged_from = std::string::npos, damaged = 0;
  while (pos < data.size()) {
    Entry e;
    if (std::size_t n = entry_at(data, pos, e); n && (e.op == "charge" || pos == 0)) {
      good.push_back(std::move(e));
      pos += n;
      continue;
    }
    std::size_t next = pos + 1;
    while (next + 8 <= data.size() && !entry_at(data, next, e)) ++next;
    if (next + 8 > data.size() && pos > 0) {  // nothing verifies after it: the last write, cut short
      torn_at = pos;
      break;
    }
    next = std::min(next, data.size());
    if (damaged_from == std::string::npos) damaged_from = pos;
    damaged += next - pos;
    pos = next;
  }
  if (damaged && !recover)
    throw std::runtime_error("charge ledger " + path_ + " is damaged at byte offset " + std::to_string(damaged_from) +
                             " (" + std::to_string(damaged) +
                             " bytes do not verify). The file is left as it is; run corrald --recover to "
                             "keep a copy and restore every intact entry");
  const bool based = !good.empty() && good.front().op == "base";
  origin_ = based ? good.front().origin : pba::week_start(pba::iso_week(now));
  if (!based)  // no base (a new file, or its base damaged): the week of the oldest charge kept
    for (const Entry& e : good) origin_ = std::min<Time>(origin_, pba::week_start(pba::iso_week(e.at)));
  LedgerConfig lc;
  lc.period_origin = lc.week_origin = origin_;
  if (!queues_.empty()) lc.default_queue = queues_.front().name;
  ledger_.emplace(queues_, lc);
  for (const Entry& e : good) replay(e);
  load_.entries = good.size();
  if (damaged) {
    load_.dropped_bytes = damaged;
    load_.damaged_copy = durable::keep_copy(dir_, path_, fsync_);
    load_.warning = "charge ledger " + path_ + " is damaged at byte offset " + std::to_string(damaged_from) +
                    "; restored " + std::to_string(good.size()) + " intact entries" +
                    (based ? "" : " (its base was lost: charges before its last compaction are gone)") +
                    "; original kept as " + load_.damaged_copy;
  }
  if (data.empty() || damaged) {
    compact();
    return;
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) durable::fail("cannot open charge ledger", path_);
  size_ = data.size();
  entries_ = good.size();
  if (torn_at != std::string::npos) {
    load_.dropped_bytes = data.size() - torn_at;
    load_.warning = "charge ledger " + path_ + ": cut off a torn tail of " + std::to_string(load_.dropped_bytes) +
                    " bytes (the last write, cut short) after " + std::to_string(good.size()) + " good entries";
    if (::ftruncate(fd_, static_cast<off_t>(torn_at)) != 0) durable::fail("cannot cut the torn tail of", path_);
    if (fsync_) ::fdatasync(fd_);
    size_ = torn_at;
  }
}

void LedgerBook::replay(const Entry& e) {
  if (e.op == "charge") {
    apply(e);
    return;
  }
  LedgerTotals t;
  t.latest_at = e.latest_at;
  for (const Row& r : e.grant) t.grant[{r.name, r.key}] = r.su;
  for (const Row& r : e.charged) t.charged[{r.name, r.key}] = r.su;
  for (const Row& r : e.project_weeks) t.project_weeks[{r.name, r.key}] = {r.su, r.cpu_seconds};
  for (const Row& r : e.user_weeks) t.user_weeks[{r.name, r.key}] = {r.su, r.cpu_seconds};
  for (const auto& [u, p] : e.user_projects) t.user_projects[u] = p;
  ledger_->restore(std::move(t));
  for (const JobRow& j : e.jobs) jobs_[j.id] = {j.run_start, j.run_seconds, j.closed, j.su, j.seconds};
}

// The one rule of a charge, for the live agent and the replay alike.
double LedgerBook::apply(const Entry& e) {
  JobCharge& c = jobs_[e.job];
  if (c.run_start != e.run_start) c = {e.run_start, 0, false, c.su, c.seconds};  // a new run
  if (c.closed) return 0;
  double su = 0;
  if (const std::int64_t delta = e.seconds - c.run_seconds; delta > 0) {
    Job j;
    j.id = e.job;
    j.project = e.project;
    j.user = e.user;
    j.queue = e.queue;
    su = ledger_->charge_at(j, delta, e.at, e.cpus, e.factor);
    c.su += su;
    c.seconds += delta;
    c.run_seconds = e.seconds;
  }
  c.closed = e.close;
  return su;
}

double LedgerBook::charge(const Job& job, double run_start, std::int64_t seconds, int cpus, Time at, bool close) {
  const JobCharge* c = this->job(job.id);
  const bool same_run = c && c->run_start == run_start;
  if (same_run && (c->closed || (seconds <= c->run_seconds && !close))) return 0;  // nothing owed
  Entry e;
  e.op = "charge";
  e.job = job.id;
  e.project = job.project;
  e.user = job.user;
  e.queue = job.queue;
  e.cpus = cpus;
  e.factor = ledger_->charge_factor(job);
  e.run_start = run_start;
  e.seconds = seconds;
  e.close = close;
  e.at = at;
  const double su = apply(e);
  batch_ += encode(e);
  ++batch_entries_;
  return su;
}

void LedgerBook::flush(bool sync) {
  if (batch_.empty()) {
    if (sync && unsynced_ && fsync_ && ::fdatasync(fd_) != 0) durable::fail("cannot sync charge ledger", path_);
    if (sync) unsynced_ = false;
    return;
  }
  durable::append(fd_, batch_, size_, sync && fsync_, "charge ledger", path_);
  size_ += batch_.size();
  entries_ += batch_entries_;
  unsynced_ = !sync;
  batch_.clear();
  batch_entries_ = 0;
  if (entries_ > kCompactAfter) {
    try {
      compact();
    } catch (const std::exception&) {  // the file as it is stays: intact, only longer
    }
  }
}

void LedgerBook::compact() {
  Entry b;
  b.op = "base";
  b.origin = origin_;
  const LedgerTotals& t = ledger_->totals();
  b.latest_at = t.latest_at;
  for (const auto& [k, su] : t.grant) b.grant.push_back({k.first, k.second, su, 0});
  for (const auto& [k, su] : t.charged) b.charged.push_back({k.first, k.second, su, 0});
  for (const auto& [k, u] : t.project_weeks) b.project_weeks.push_back({k.first, k.second, u.su, u.cpu_seconds});
  for (const auto& [k, u] : t.user_weeks) b.user_weeks.push_back({k.first, k.second, u.su, u.cpu_seconds});
  for (const auto& [u, p] : t.user_projects) b.user_projects.emplace_back(u, p);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (keep_ && !keep_(it->first)) {
      it = jobs_.erase(it);
      continue;
    }
    const JobCharge& c = it->second;
    b.jobs.push_back({it->first, c.run_start, c.run_seconds, c.closed, c.su, c.seconds});
    ++it;
  }
  const std::string out = encode(b);
  durable::replace_file(dir_, path_, out, fsync_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) durable::fail("cannot open charge ledger", path_);
  size_ = out.size();
  entries_ = 1;
  unsynced_ = false;
}

}  // namespace corral::agent
