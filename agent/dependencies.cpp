// Jobs that wait for other jobs (qsub -W depend=afterok|afterany|afternotok:ID, Grid Engine's
// -hold_jid): such a job is pending but not eligible (kept out of pending_, so no pass sees it)
// until every dependency is met. A dependency that can never be met (afterok on a job that
// failed, afternotok on one that completed) ends the job dependency_never_met instead of
// leaving it waiting for ever. What is still unmet is journaled (JobRecord::waits_on), so a
// restart keeps it.
#include "agent/daemon.hpp"
#include "proto/dependency.hpp"

namespace corral::agent {
namespace {

using Verdict = proto::DependVerdict;

// Whether dependency `d` is met by job `dep` (nullptr: unknown); `why` says why it never can be.
Verdict judge(const proto::Dependency& d, const JobRecord* dep, std::string& why) {
  return proto::judge_dependency(d, dep != nullptr, dep && dep->ended(),
                                 dep && dep->end_reason == name(EndReason::Completed), dep ? dep->end_reason : "", why);
}

}  // namespace

void Daemon::hold_for_dependencies(const JobRecord& rec) {
  dep_waiting_.insert(rec.id);
  for (const proto::Dependency& d : rec.waits_on) dependents_.emplace(d.job, rec.id);
  dep_check_.push_back(rec.id);  // a dependency may have ended already
  dirty_ = true;
}

void Daemon::dependency_ended(std::uint64_t id) {
  dep_waiting_.erase(id);  // ended while waiting (cancelled)
  auto [b, e] = dependents_.equal_range(id);
  for (auto it = b; it != e; ++it) dep_check_.push_back(it->second);
  dependents_.erase(b, e);
}

void Daemon::resolve_dependencies() {
  // A job ended here queues its own dependents: the loop runs until the chain is settled.
  while (!dep_check_.empty()) {
    std::vector<std::uint64_t> ids;
    ids.swap(dep_check_);
    for (std::uint64_t id : ids) {
      JobRecord* rec = store_->find(id);
      if (!rec || !dep_waiting_.count(id) || rec->ended()) continue;
      std::string never;
      std::vector<proto::Dependency> left;
      for (const proto::Dependency& d : rec->waits_on) {
        const Verdict v = judge(d, store_->find(d.job), never);
        if (v == Verdict::Never) break;
        if (v == Verdict::Waiting) left.push_back(d);
      }
      if (!never.empty()) {
        finish(*rec, EndReason::DependencyNeverMet, -1, never);
        continue;
      }
      if (left.size() == rec->waits_on.size()) continue;
      rec->waits_on = std::move(left);
      store_->put(*rec);
      if (!rec->waits_on.empty()) continue;
      dep_waiting_.erase(id);
      if (rec->hold.empty()) pending_.insert(id);  // a held job waits for its release too
      dirty_ = true;
      log_line("job " + std::to_string(id) + ": its dependencies are met; it is eligible");
    }
  }
}

std::string Daemon::dependency_text(const JobRecord& rec) const {
  std::string out;
  for (const proto::Dependency& d : rec.waits_on) {
    const auto it = store_->jobs().find(d.job);
    out += (out.empty() ? "" : ", ") + proto::dependency_item(d, it == store_->jobs().end() ? "" : it->second.state);
  }
  return out;
}

}  // namespace corral::agent
