// Cgroup enforcement of job slots. One class per controller, each with the same lifecycle
// (prepare -> attach -> usage -> cleanup, as Mesos' cgroups isolator does), composed by a backend.
// The backend is an interface with two implementations: cgroup v1 (cgroup_v1.cpp, one hierarchy
// per controller, e.g. /sys/fs/cgroup/memory/corral/job.42) and cgroup v2 (cgroup_v2.cpp, one
// unified tree: inside the cgroup systemd delegated to corrald when it did, e.g.
// /sys/fs/cgroup/system.slice/corrald.service/corral/job.42). Everything lives under one parent
// group Corral owns (default "corral"), one child per slot named "job.<id>".
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
  virtual std::string version() const = 0;                    // "v1" or "v2"
  // Where the slots live and how they got there, for the log.
  virtual std::string describe() const = 0;
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
  // The limits this backend cannot enforce on this machine, one line each starting "cpus:" or
  // "memory:" with the reason; empty: every limit is enforced.
  virtual std::vector<std::string> unenforced() const { return {}; }
};

// The start check: "" when every cpus and memory limit is enforced; else, when strict, throws
// CgroupError saying what is not and why, and otherwise returns that as a warning to log once.
std::string check_enforcement(const CgroupBackend& backend, bool strict);

// The cgroup v1 backend: cpuset, memory, freezer, cpuacct controllers via libcgroup.
// Creates the parent group (copying cpus/mems from the root cpuset, memory.use_hierarchy=1).
// Throws CgroupError if libcgroup cannot initialise or a controller is not mounted.
std::unique_ptr<CgroupBackend> make_cgroup_v1(const std::string& parent = "corral");

// Whether cgroup v1 with cpuset/memory/freezer is usable here and we may write it (root).
// On false, *why says what is missing (tests skip with that reason).
bool cgroup_v1_available(std::string* why = nullptr);

// Whether the v1 cpuset, memory, freezer and cpuacct controllers are mounted (any user).
bool cgroup_v1_mounted();

// The cgroup v2 (unified) backend: plain files, slots in <mount><base>/<parent>/job.<id>.
// mount "": the first cgroup2 mount in /proc/self/mounts (or a fake tree laid out like one, for
// tests); base "": the root. It enables cpuset, memory and cpu in base's and parent's
// cgroup.subtree_control where they are offered; where they are not (a hybrid machine keeps them
// on v1), freezing, killing and accounting still work and unenforced() says what is not.
// Uses cgroup.freeze / cgroup.kill (Linux >= 5.2 / 5.14).
std::unique_ptr<CgroupBackend> make_cgroup_v2(const std::string& parent = "corral", const std::string& mount = "",
                                              const std::string& base = "");
bool cgroup_v2_available(std::string* why = nullptr);

// This process's cgroup v2 path ("/system.slice/corrald.service"), from the "0::" line of
// /proc/self/cgroup (or of `text`); "" when it has none.
std::string own_cgroup_v2(const std::string& text = "");
// Whether systemd delegated this group (Delegate=yes): its trusted.delegate or user.delegate
// extended attribute, as systemd itself checks.
bool cgroup_delegated(const std::string& dir);
// systemd's delegation rules for a daemon in its delegated group <mount><own>: no process may stay
// in a group that enables controllers for its children, so every process of it moves into the
// leaf <own>/<leaf>. Throws CgroupError if one cannot be moved.
void enter_delegated_leaf(const std::string& mount, const std::string& own, const std::string& leaf = "corrald");
// The v2 backend as corrald places it: when its own cgroup is delegated to it (Delegate=yes), it
// moves itself into <own>/corrald and the slots live in <own>/<parent>; otherwise (the root, a
// container, no systemd) in <mount>/<parent>.
std::unique_ptr<CgroupBackend> make_cgroup_v2_delegated(const std::string& parent = "corral");

// version "v1", "v2", or "auto" (v1 when its controllers are mounted, else v2 as corrald places
// it). Throws CgroupError for another version.
std::unique_ptr<CgroupBackend> make_cgroup(const std::string& parent = "corral", const std::string& version = "auto");

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
