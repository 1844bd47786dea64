// The job store bridge: how a job's state changes are recorded in the Store
// (the journal) — loaded at start, ended, put back to pending — and the job
// script each run executes.
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <tuple>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/node/launcher.hpp"
#include "agent/write_fully.hpp"

namespace corral::agent {

// The pending and active sets from the stored jobs; PBA's throughput progress from the ended ones.
void Daemon::load_jobs() {
  for (const auto& [id, rec] : store_->jobs()) {
    if (rec.is_array()) {  // stands for its tasks: never queued itself
      if (!rec.ended()) array_live_[id];
      continue;
    }
    if (rec.array_id) {
      array_tasks_[{rec.array_id, rec.array_index}] = id;
      if (!rec.ended()) array_live_[rec.array_id].insert(id);
    }
    if (rec.state == proto::state::kPending && !rec.hold.empty()) held_.insert(id);
    if (rec.state == proto::state::kPending && !rec.waits_on.empty()) hold_for_dependencies(rec);
    else if (rec.state == proto::state::kPending && rec.hold.empty()) pending_.insert(id);
    else if (rec.state == proto::state::kPending) continue;
    else if (!rec.ended()) active_.insert(id);
    else if (sched_.pba.enabled && rec.end_reason == "completed" && !rec.spec.project.empty())
      ++sched_.pba.jobs_done[rec.spec.project];  // throughput SLA progress (ended jobs kept)
  }
}

void Daemon::requeue(JobRecord& rec, const std::string& why, bool keep_work, int exit_code) {
  double t = now();
  charge_job(rec, t, true);
  rec.runs.push_back(proto::RunInfo{rec.start_time, t, std::string(name(EndReason::Preempted)), exit_code, why});
  if (keep_work && rec.start_time > 0)
    rec.work_done += static_cast<std::int64_t>(t - rec.start_time - suspended_total(rec, t));
  if (keep_work) rec.checkpoints += 1;
  close_suspension(rec, t);
  rec.held = false;
  rec.cores.clear();
  rec.backfilled = false;
  rec.backfill_estimate = 0;
  rec.requeue_requested = false;
  if (mesh_) {
    mesh_give_back(rec, why);  // the mesh's queue has it again, with its work kept
  } else {
    rec.state = std::string(proto::state::kPending);
    rec.requeues += 1;
    rec.cycles_pending = 0;  // pba.hpp: a requeue starts its pending cycles again (pba::on_requeue)
    snap_stale_.push_back(rec.id);  // the kept snapshot may still hold its entry from before its start
    rec.comment = why;
    store_->put(rec);
    active_.erase(rec.id);
    pending_.insert(rec.id);
    dirty_ = true;
    log_line("job " + std::to_string(rec.id) + " back to pending: " + why);
  }
  proto::Event ev;
  ev.kind = "requeued";
  ev.job = rec.id;
  ev.user = rec.user;
  ev.reason = why;
  ev.end_reason = rec.runs.back().end_reason;
  ev.exit_code = exit_code;
  ev.run = static_cast<std::int32_t>(rec.runs.size());
  ev.start_time = rec.runs.back().start;
  pub_.publish(ev);
}

void Daemon::finish(JobRecord& rec, EndReason why, int exit_code, const std::string& msg) {
  const std::string reason(name(why));
  double t = now();
  const bool ran = active_.count(rec.id) > 0;  // else it ends before any run (cancel, reject, launch)
  if (ran) {
    charge_job(rec, t, true);
    rec.runs.push_back(proto::RunInfo{rec.start_time, t, reason, exit_code, msg});
  }
  close_suspension(rec, t);
  rec.held = false;
  rec.state = std::string(proto::state::kEnded);
  rec.end_reason = reason;
  rec.exit_code = exit_code;
  rec.end_time = t;
  rec.comment = msg;
  // The script and environment are not needed any more: keep memory small.
  rec.spec.script.clear();
  rec.spec.script.shrink_to_fit();
  rec.env_blob.clear();
  rec.env_blob.shrink_to_fit();
  if (auto u = launcher_->has(rec.id) ? launcher_->usage(rec.id) : std::nullopt) {
    rec.cpu_seconds = u->cpu_s;
    rec.rss_mb = u->max_rss_mb;
  }
  store_->put(rec);
  pending_.erase(rec.id);
  held_.erase(rec.id);
  active_.erase(rec.id);
  dependency_ended(rec.id);
  remove_script(rec.id);
  if (sched_.pba.enabled && reason == "completed" && !rec.spec.project.empty())
    ++sched_.pba.jobs_done[rec.spec.project];  // throughput SLA progress (pba.hpp contract)
  dirty_ = true;
  // Queue drained: hand the memory of a burst (scripts, environments, the kept pass snapshot)
  // back. (finish() runs after the pass's schedule() has returned: snap_ is not in use.)
  if (pending_.empty() && active_.empty()) {
    drop_pass_snapshot();
    ::malloc_trim(0);
  }
  log_line("job " + std::to_string(rec.id) + " ended: " + reason + " exit " +
           std::to_string(exit_code) + (msg.empty() ? "" : " (" + msg + ")"));
  if (mesh_ && !rec.share) mesh_ended(rec);  // a share's end is not the job's
  proto::Event e;
  e.kind = "ended";
  e.job = rec.id;
  e.user = rec.user;
  e.reason = reason;
  e.end_reason = reason;
  e.exit_code = exit_code;
  if (ran) {
    e.run = static_cast<std::int32_t>(rec.runs.size());
    e.start_time = rec.start_time;
  }
  e.cores = rec.cores;
  e.cpu_seconds = rec.cpu_seconds;
  e.rss_mb = rec.rss_mb;
  pub_.publish(e);
  notify_waiters(rec);
  if (rec.array_id) array_task_ended(rec);
}

std::string Daemon::write_script(const JobRecord& rec) {
  // Root-owned 0711 dir: users cannot list it; each script is its owner's, 0500.
  // Per start: one open (no mkdir, unlink or geteuid first: the dir is made, and a leftover of
  // the same id removed, only when the open says so) and no fchown when the agent's user owns it
  // already (new files take the dir's group unless it is setgid: checked when the dir is made).
  std::string dir = cfg_.state_dir + "/scripts";
  std::string path = dir + "/" + std::to_string(rec.id);
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(path.c_str(), flags, 0500);
  for (int attempt = 0; fd < 0 && attempt < 2 && (errno == ENOENT || errno == EEXIST); ++attempt) {
    if (errno == ENOENT) {
      if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) return "";
      scripts_owner_.forget();
    } else {
      ::unlink(path.c_str());
    }
    fd = ::open(path.c_str(), flags, 0500);
  }
  if (fd < 0) return "";
  bool ok = write_fully(fd, rec.spec.script);
  if (ok && scripts_owner_.euid() == 0 && !scripts_owner_.owned_by(dir, rec.uid, rec.gid))
    ok = ::fchown(fd, rec.uid, rec.gid) == 0;
  if (ok && ::close(fd) != 0) ok = false;
  else if (!ok) ::close(fd);
  if (!ok) {
    int err = errno;  // the caller tells a full disk from other failures
    ::unlink(path.c_str());
    errno = err;
    return "";
  }
  return path;
}

void Daemon::remove_script(std::uint64_t id) {
  ::unlink((cfg_.state_dir + "/scripts/" + std::to_string(id)).c_str());
  if (mesh_) remove_host_files(id);
}

proto::JobInfo Daemon::info(const JobRecord& r) const {
  proto::JobInfo j;
  j.id = r.id;
  j.name = r.spec.name;
  j.user = r.user;
  j.uid = r.uid;
  j.queue = r.spec.queue;
  j.project = r.spec.project;
  j.state = r.state;
  j.exit_code = r.exit_code;
  j.end_reason = r.end_reason;
  j.submit_time = r.submit_time;
  j.start_time = r.start_time;
  j.end_time = r.end_time;
  j.walltime = r.spec.walltime;
  j.ncpus = r.spec.ncpus;
  j.pe = r.spec.pe;
  std::tie(j.slots_min, j.slots_max) = slot_range(r.spec);
  j.slots = r.cores.empty() ? 0 : static_cast<int>(r.cores.size());
  j.suspended_seconds = suspended_total(r, now());
  j.mem_mb = r.spec.mem_mb;
  j.jobfs_mb = r.spec.jobfs_mb;
  j.cores = r.cores;
  j.cpu_seconds = r.cpu_seconds;
  j.rss_mb = r.rss_mb;
  j.requeues = r.requeues;
  j.stdout_path = r.spec.stdout_path;
  j.stderr_path = r.spec.stderr_path;
  j.comment = r.comment;
  j.runs = r.runs;
  j.flow_step = r.spec.flow_step;
  j.preempt = r.spec.preempt.empty() ? std::string(name(cfg_.preempt_mode)) : r.spec.preempt;
  j.backfilled = r.backfilled;
  j.depend = r.spec.depend;
  wait_info(r, j);
  charge_info(r, j);
  if (r.spec.array.on()) array_info(r, j);
  if (r.state == proto::state::kRunning || r.state == proto::state::kSuspended)
    j.runs.push_back(proto::RunInfo{r.start_time, 0, "", -1, ""});  // the current run
  return j;
}

}  // namespace corral::agent
