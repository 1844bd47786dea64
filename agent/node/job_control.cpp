// Acting on a running job: freezing and thawing it, killing it (cancel,
// requeue, a limit), and the checkpoint signal with its grace period.
#include "launcher_impl.hpp"

#include <csignal>

namespace corral::node {

std::string Launcher::suspend(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  auto& j = it->second;
  if (j.suspended) return "job " + std::to_string(id) + " is already suspended";
  impl_->settle(id, j);
  try {
    impl_->cg->freeze(impl_->slot(id));
  } catch (const std::exception& e) {
    return std::string("suspend: ") + e.what();
  }
  j.acc_ms = impl_->used_ms(j, now_ms());
  j.suspended = true;
  impl_->save_record(id, j);
  return {};
}

std::string Launcher::resume(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  auto& j = it->second;
  if (!j.suspended) return "job " + std::to_string(id) + " is not suspended";
  try {
    impl_->cg->thaw(impl_->slot(id));
  } catch (const std::exception& e) {
    return std::string("resume: ") + e.what();
  }
  j.suspended = false;
  j.run_started_ms = now_ms();
  impl_->save_record(id, j);
  return {};
}

std::string Launcher::cancel(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  impl_->kill_job(id, it->second, EndReason::Cancelled, "cancelled");
  return {};
}

std::string Launcher::requeue(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  impl_->kill_job(id, it->second, EndReason::Preempted, "preempted: stopped and requeued");
  return {};
}

std::string Launcher::checkpoint(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  auto& j = it->second;
  if (j.ckpt_deadline_ms >= 0) return "job " + std::to_string(id) + " is already checkpointing";
  impl_->settle(id, j);
  if (j.suspended) {
    if (auto err = resume(id); !err.empty()) return err;
  }
  // Signal every process of the job (not the shepherd): the job decides who writes what.
  for (pid_t p : impl_->cg->pids(impl_->slot(id)))
    if (j.served || p != j.shepherd) ::kill(p, j.spec.ckpt_signal);
  j.ckpt_deadline_ms = now_ms() + static_cast<std::int64_t>(j.spec.ckpt_grace_s) * 1000;
  impl_->save_record(id, j);
  return {};
}
void Launcher::Impl::kill_job(std::uint64_t id, Job& j, EndReason why, std::string msg) {
  settle(id, j);
  if (!j.kill_reason) {
    j.kill_reason = why;
    j.kill_message = std::move(msg);
  }
  try {
    // The shepherd (if any in the slot) reaps them, records the status, exits; the server is
    // outside the slot and does the same for its jobs.
    cg->kill_all(slot(id), 5000, j.served ? 0 : j.shepherd);
  } catch (const std::exception&) {
  }
  if (j.suspended) j.suspended = false;
}

}  // namespace corral::node
