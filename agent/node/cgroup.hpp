// Cgroup enforcement of job slots. One class per controller, each with the same lifecycle
// (prepare -> attach -> usage -> cleanup, as Mesos' cgroups isolator does), composed by a backend.
// The backend is an interface so a cgroup v2 (unified) implementation can replace the v1 one.
// Everything lives under one parent group Corral owns (default "corral"), one child per slot
// named "job.<id>", e.g. /sys/fs/cgroup/memory/corral/job.42. Created through libcgroup.
// Errors throw CgroupError with the path and the libcgroup/kernel reason.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace corral::node {

struct CgroupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SlotLimits {
  std::vector<int> cpus;     // OS CPU ids (cpuset.cpus); empty = all CPUs of the parent
  std::vector<int> mems;     // NUMA ids (cpuset.mems); empty = all mems of the parent
  std::int64_t mem_mb = 0;   // memory (and memory+swap) limit; 0 = unlimited
};

struct SlotUsage {
  double cpu_s = 0;              // cpuacct.usage
  std::int64_t mem_mb = 0;       // memory.usage_in_bytes
  std::int64_t max_mem_mb = 0;   // memory.max_usage_in_bytes
  std::int64_t failcnt = 0;      // memory.failcnt: times the limit was hit
  std::int64_t oom_kills = 0;    // memory.oom_control oom_kill: processes the OOM killer took
  bool under_oom = false;
};

enum class FreezeState { Thawed, Freezing, Frozen, Unknown };
const char* to_string(FreezeState s);

// One controller's lifecycle for slots (v1: one hierarchy per controller).
class Controller {
 public:
  virtual ~Controller() = default;
  virtual const char* name() const = 0;
  virtual void prepare(const std::string& slot, const SlotLimits& limits) = 0;  // create + limits
  virtual void attach(const std::string& slot, pid_t pid) = 0;
  virtual void usage(const std::string& slot, SlotUsage& out) const = 0;
  virtual void cleanup(const std::string& slot) = 0;  // remove the (empty) group; absent is fine
  virtual bool exists(const std::string& slot) const = 0;
};

// What the launcher needs from cgroups, whatever the version.
class CgroupBackend {
 public:
  virtual ~CgroupBackend() = default;
  virtual std::string version() const = 0;                    // "v1"
  virtual std::string parent() const = 0;                     // "corral"
  virtual void create(const std::string& slot, const SlotLimits& limits) = 0;
  // create() for a new job: a leftover slot of the same name (an earlier life) is destroyed first.
  virtual void create_fresh(const std::string& slot, const SlotLimits& limits) {
    if (has_slot(slot)) destroy(slot);
    create(slot, limits);
  }
  virtual void attach(const std::string& slot, pid_t pid) = 0;
  virtual void freeze(const std::string& slot) = 0;           // returns once FROZEN
  virtual void thaw(const std::string& slot) = 0;
  virtual FreezeState freezer_state(const std::string& slot) const = 0;
  virtual std::vector<pid_t> pids(const std::string& slot) const = 0;  // every process in the slot
  virtual SlotUsage usage(const std::string& slot) const = 0;
  // OOM kills so far: the one figure poll() needs every time (one file, not all of usage()).
  virtual std::int64_t oom_kills(const std::string& slot) const { return usage(slot).oom_kills; }
  // Freeze, SIGKILL every process, thaw, wait (up to timeout_ms) until the slot is empty.
  // Returns true if empty. Nothing can fork its way out while frozen. spare: one pid left alive
  // (the launcher's shepherd, which then reaps the killed ones and exits by itself).
  virtual bool kill_all(const std::string& slot, int timeout_ms = 5000, pid_t spare = 0) = 0;
  virtual void destroy(const std::string& slot) = 0;          // kill_all + remove every group
  virtual std::vector<std::string> list() const = 0;          // slots under the parent, any controller
  // Does this slot exist in any controller? (a few stats instead of listing every slot)
  virtual bool has_slot(const std::string& slot) const {
    auto l = list();
    return std::find(l.begin(), l.end(), slot) != l.end();
  }
  virtual std::string cpuset_path(const std::string& slot) const = 0;  // for diagnostics/tests
  // The files a single-threaded process writes "0" into to join the slot itself (the shepherd
  // server's children do, so the agent never waits for them): v1 "tasks", v2 "cgroup.procs".
  // Empty: only attach() works.
  virtual std::vector<std::string> procs_files(const std::string&) const { return {}; }
  // Remove the parent group itself (uninstall, tests). Fails if slots remain.
  virtual void remove_parent() = 0;
  // Limits this backend cannot enforce on this machine ("" = all of them are enforced).
  virtual std::string limitations() const { return {}; }
};

// The cgroup v1 backend: cpuset, memory, freezer, cpuacct controllers via libcgroup.
// Creates the parent group (copying cpus/mems from the root cpuset, memory.use_hierarchy=1).
// Throws CgroupError if libcgroup cannot initialise or a controller is not mounted.
std::unique_ptr<CgroupBackend> make_cgroup_v1(const std::string& parent = "corral");

// Whether cgroup v1 with cpuset/memory/freezer is usable here and we may write it (root).
// On false, *why says what is missing (tests skip with that reason).
bool cgroup_v1_available(std::string* why = nullptr);

// The cgroup v2 (unified) backend: plain files under the cgroup2 mount (mount "" = find it in
// /proc/self/mounts). cpuset/memory limits need those controllers delegated to cgroup2; when a
// hybrid machine keeps them on v1, freezing, killing and accounting still work and limitations()
// says what is not enforced. Uses cgroup.freeze / cgroup.kill (Linux >= 5.2 / 5.14).
std::unique_ptr<CgroupBackend> make_cgroup_v2(const std::string& parent = "corral", const std::string& mount = "");
bool cgroup_v2_available(std::string* why = nullptr);

// v1 when its controllers are mounted, else v2.
std::unique_ptr<CgroupBackend> make_cgroup(const std::string& parent = "corral");

// Slot names <-> job ids ("job.42").
std::string slot_name(std::uint64_t jobid);
std::optional<std::uint64_t> slot_jobid(const std::string& slot);

// One job's cgroups: a thin handle over a backend (the shape the daemon uses directly).
class SlotCgroups {
 public:
  SlotCgroups(CgroupBackend& backend, std::uint64_t jobid) : b_(&backend), slot_(slot_name(jobid)) {}
  void create(const std::vector<int>& cpus, const std::vector<int>& mems, std::int64_t mem_mb) {
    b_->create(slot_, SlotLimits{cpus, mems, mem_mb});
  }
  void attach(pid_t pid) { b_->attach(slot_, pid); }
  void freeze() { b_->freeze(slot_); }
  void thaw() { b_->thaw(slot_); }
  FreezeState state() const { return b_->freezer_state(slot_); }
  std::vector<pid_t> pids() const { return b_->pids(slot_); }
  bool kill_all(int timeout_ms = 5000) { return b_->kill_all(slot_, timeout_ms); }
  SlotUsage usage() const { return b_->usage(slot_); }
  void destroy() { b_->destroy(slot_); }
  const std::string& name() const { return slot_; }

 private:
  CgroupBackend* b_;
  std::string slot_;
};

// Job ids of the slots left under the parent (for adopting or cleaning up after a restart).
std::vector<std::uint64_t> list_existing(const CgroupBackend& backend);

}  // namespace corral::node
