// The cgroup v1 backend: one hierarchy per controller (cpuset, memory, freezer, cpuacct).
#include "cgroup.hpp"

#include <fcntl.h>
#include <libcgroup.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "cgroup_io.hpp"
#include "topology.hpp"

namespace corral::node {
namespace fs = std::filesystem;
namespace {
using namespace cgio;

std::string cg_error(int code) {
  std::string s = cgroup_strerror(code);
  if (code == ECGOTHER) s += std::string(": ") + std::strerror(cgroup_get_last_errno());
  return s;
}

// libcgroup parses /proc/mounts once per process.
int init_libcgroup() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] { rc = cgroup_init(); });
  return rc;
}

std::string mount_point(const char* controller) {
  char* mp = nullptr;
  int rc = cgroup_get_subsys_mount_point(controller, &mp);
  if (rc != 0 || !mp) return {};
  std::string s = mp;
  free(mp);
  return s;
}


// prepare() found the slot group already there (exclusive mode): a leftover of an earlier life.
struct SlotExists : CgroupError {
  using CgroupError::CgroupError;
};

// Values to write into a new slot group, in order.
using Values = std::vector<std::pair<std::string, std::string>>;

// A libcgroup struct cgroup with one controller, freed on scope exit.
struct CgHandle {
  struct cgroup* cg = nullptr;
  struct cgroup_controller* ctrl = nullptr;
  CgHandle(const std::string& name, const char* controller) {
    cg = cgroup_new_cgroup(name.c_str());
    if (!cg) throw CgroupError("libcgroup: cannot allocate cgroup " + name);
    ctrl = cgroup_add_controller(cg, controller);
    if (!ctrl) {
      cgroup_free(&cg);
      throw CgroupError(std::string("libcgroup: cannot add controller ") + controller + " to " + name);
    }
  }
  ~CgHandle() { cgroup_free(&cg); }
  CgHandle(const CgHandle&) = delete;
  CgHandle& operator=(const CgHandle&) = delete;
};

// Common lifecycle of one v1 controller: group <parent>/<slot> in that controller's hierarchy.
class V1Controller : public Controller {
 public:
  V1Controller(const char* name, std::string parent) : name_(name), parent_(std::move(parent)) {
    mount_ = mount_point(name);
    if (mount_.empty()) throw CgroupError(std::string("cgroup v1 controller '") + name + "' is not mounted");
  }
  const char* name() const override { return name_; }
  std::string dir(const std::string& slot) const { return mount_ + "/" + parent_ + (slot.empty() ? "" : "/" + slot); }
  bool exists(const std::string& slot) const override { return fs::is_directory(dir(slot)); }

  // The parent group Corral owns; subclasses add the values it needs.
  // Checked once per backend (not per job); a parent removed meanwhile shows as ENOENT at mkdir.
  virtual void ensure_parent() {
    if (parent_ok_) return;
    parent_ok_ = true;
    if (exists("")) return;
    CgHandle h(parent_, name_);
    parent_values(h.ctrl);
    int rc = cgroup_create_cgroup(h.cg, 0);
    if (rc != 0) {
      parent_ok_ = false;
      throw CgroupError("cannot create " + dir("") + ": " + cg_error(rc));
    }
  }
  void parent_gone() { parent_ok_ = false; }
  virtual void parent_values(struct cgroup_controller*) {}
  virtual Values slot_values(const SlotLimits&) { return {}; }

  // Slot groups are made with mkdir + direct writes, not cgroup_create_cgroup: libcgroup re-reads
  // /proc/mounts, mkdir -p's the whole path and chowns every control file on each call (~100
  // syscalls per controller), which dominated job launch time. The parent (once) still uses it.
  void prepare(const std::string& slot, const SlotLimits& limits) override { prepare(slot, limits, false); }
  // exclusive: an existing group throws SlotExists instead of being reused.
  void prepare(const std::string& slot, const SlotLimits& limits, bool exclusive) {
    ensure_parent();
    Values vals = slot_values(limits);
    std::string d = dir(slot);
    int rc = ::mkdir(d.c_str(), 0755);
    if (rc != 0 && errno == ENOENT) {  // the parent went away since it was checked
      parent_gone();
      ensure_parent();
      vals = slot_values(limits);
      rc = ::mkdir(d.c_str(), 0755);
    }
    if (rc != 0 && errno == EEXIST && exclusive) throw SlotExists(d + " exists");
    if (rc != 0 && errno != EEXIST) throw CgroupError("cannot create " + d + ": " + std::strerror(errno));
    for (auto& [k, v] : vals) {
      std::string err;
      if (!write_file(d + "/" + k, v, &err)) throw CgroupError("cannot create " + d + ": " + err);
    }
  }
  void attach(const std::string& slot, pid_t pid) override {
    std::string err;
    if (!write_file(dir(slot) + "/cgroup.procs", std::to_string(pid), &err))
      throw CgroupError("cannot move pid " + std::to_string(pid) + " into " + dir(slot) + ": " + err);
  }
  void usage(const std::string&, SlotUsage&) const override {}
  void cleanup(const std::string& slot) override {
    // rmdir only removes an empty group: a job's processes are never migrated to the parent
    // (libcgroup's CGFLAG_DELETE_EMPTY_ONLY, without its per-call mount table walk).
    if (::rmdir(dir(slot).c_str()) != 0 && errno != ENOENT)
      throw CgroupError("cannot remove " + dir(slot) + ": " + std::strerror(errno));
  }
  void set(const std::string& slot, const char* key, const std::string& value) {
    std::string err;
    if (!write_file(dir(slot) + "/" + key, value, &err))
      throw CgroupError("cannot set " + dir(slot) + "/" + key + "=" + value + ": " + err);
  }
  std::vector<pid_t> procs(const std::string& slot) const {
    std::vector<pid_t> out;
    std::ifstream in(dir(slot) + "/cgroup.procs");
    pid_t p;
    while (in >> p) out.push_back(p);
    return out;
  }
  std::vector<std::string> children() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir(""), ec))
      if (e.is_directory()) out.push_back(e.path().filename().string());
    return out;
  }

 protected:
  const char* name_;
  std::string parent_;
  std::string mount_;
  bool parent_ok_ = false;
};

class CpusetController : public V1Controller {
 public:
  explicit CpusetController(std::string parent) : V1Controller("cpuset", std::move(parent)) {}
  // A cpuset child needs cpus and mems before any task can join: copy the root's.
  void parent_values(struct cgroup_controller* c) override {
    root_cpus_ = trim(read_file(mount_ + "/cpuset.effective_cpus"));
    if (root_cpus_.empty()) root_cpus_ = trim(read_file(mount_ + "/cpuset.cpus"));
    root_mems_ = trim(read_file(mount_ + "/cpuset.effective_mems"));
    if (root_mems_.empty()) root_mems_ = trim(read_file(mount_ + "/cpuset.mems"));
    cgroup_add_value_string(c, "cpuset.cpus", root_cpus_.c_str());
    cgroup_add_value_string(c, "cpuset.mems", root_mems_.c_str());
  }
  // The parent's cpus/mems are read once and again only when a slot asks for more than they had
  // (they change only if an admin changes them), not twice per job.
  Values slot_values(const SlotLimits& l) override {
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0 || pcpus_.empty()) {
        pcpus_ = trim(read_file(dir("") + "/cpuset.cpus"));
        pmems_ = trim(read_file(dir("") + "/cpuset.mems"));
      }
      std::string cpus = l.cpus.empty() ? pcpus_ : to_cpu_list(l.cpus);
      std::string mems = l.mems.empty() ? pmems_ : to_cpu_list(l.mems);
      try {
        check_subset(cpus, pcpus_, "CPUs");
        check_subset(mems, pmems_, "NUMA nodes");
      } catch (const CgroupError&) {
        if (attempt > 0) throw;
        continue;
      }
      return {{"cpuset.cpus", cpus}, {"cpuset.mems", mems}};
    }
  }
  void ensure_parent() override {
    if (parent_ok_) return;
    pcpus_.clear();
    V1Controller::ensure_parent();
    // A parent made by a corrald killed between libcgroup's mkdir and its writes has no cpus or
    // mems, and no child of it could take a task: it gets the root's, as a new one does.
    for (const char* key : {"cpus", "mems"}) {
      const std::string file = dir("") + "/cpuset." + key;
      if (!trim(read_file(file)).empty()) continue;
      std::string root = trim(read_file(mount_ + "/cpuset.effective_" + key));
      if (root.empty()) root = trim(read_file(mount_ + "/cpuset." + key));
      std::string err;
      if (!write_file(file, root, &err)) throw CgroupError("cannot set " + file + "=" + root + ": " + err);
    }
  }
  void check_subset(const std::string& want, const std::string& have, const char* what) {
    auto w = parse_cpu_list(want), h = parse_cpu_list(have);
    for (int x : w)
      if (std::find(h.begin(), h.end(), x) == h.end())
        throw CgroupError(std::string(what) + " " + want + " are not all available (this node has " + have + ")");
  }

 private:
  std::string root_cpus_, root_mems_;
  std::string pcpus_, pmems_;  // the parent's, cached
};

class MemoryController : public V1Controller {
 public:
  explicit MemoryController(std::string parent) : V1Controller("memory", std::move(parent)) {
    has_memsw_ = fs::exists(mount_ + "/memory.memsw.limit_in_bytes");
  }
  void ensure_parent() override {
    if (parent_ok_) return;
    V1Controller::ensure_parent();
    // Hierarchical accounting so the parent sees its jobs; fails harmlessly once children exist.
    if (read_int(dir("") + "/memory.use_hierarchy") != 1) {
      try {
        set("", "memory.use_hierarchy", "1");
      } catch (const CgroupError&) {
      }
    }
  }
  Values slot_values(const SlotLimits& l) override {
    if (l.mem_mb <= 0) return {};
    std::string bytes = std::to_string(l.mem_mb * 1024 * 1024);
    // limit before memsw (memsw must stay >= limit); memsw = limit: swap is no way around it.
    Values v{{"memory.limit_in_bytes", bytes}};
    if (has_memsw_) v.emplace_back("memory.memsw.limit_in_bytes", bytes);
    return v;
  }
  std::int64_t oom_kills(const std::string& slot) const {
    return keyed_value(read_file(dir(slot) + "/memory.oom_control"), "oom_kill");
  }
  void usage(const std::string& slot, SlotUsage& u) const override {
    std::string d = dir(slot);
    u.mem_mb = read_int(d + "/memory.usage_in_bytes") >> 20;
    u.max_mem_mb = read_int(d + "/memory.max_usage_in_bytes") >> 20;
    u.failcnt = read_int(d + "/memory.failcnt");
    if (has_memsw_) u.failcnt = std::max(u.failcnt, read_int(d + "/memory.memsw.failcnt"));
    std::string oom = read_file(d + "/memory.oom_control");
    u.oom_kills = keyed_value(oom, "oom_kill");
    u.under_oom = keyed_value(oom, "under_oom") != 0;
  }

 private:
  bool has_memsw_ = false;
};

class FreezerController : public V1Controller {
 public:
  explicit FreezerController(std::string parent) : V1Controller("freezer", std::move(parent)) {}
  FreezeState state(const std::string& slot) const {
    std::string s = read_file(dir(slot) + "/freezer.state");
    if (s.rfind("THAWED", 0) == 0) return FreezeState::Thawed;
    if (s.rfind("FREEZING", 0) == 0) return FreezeState::Freezing;
    if (s.rfind("FROZEN", 0) == 0) return FreezeState::Frozen;
    return FreezeState::Unknown;
  }
};

class CpuacctController : public V1Controller {
 public:
  explicit CpuacctController(std::string parent) : V1Controller("cpuacct", std::move(parent)) {}
  void usage(const std::string& slot, SlotUsage& u) const override {
    u.cpu_s = static_cast<double>(read_int(dir(slot) + "/cpuacct.usage")) / 1e9;
  }
};

class V1Backend : public CgroupBackend {
 public:
  explicit V1Backend(std::string parent) : parent_(std::move(parent)) {
    check_parent(parent_);
    int rc = init_libcgroup();
    if (rc != 0) throw CgroupError("libcgroup cannot initialise: " + cg_error(rc));
    cpuset_ = std::make_unique<CpusetController>(parent_);
    memory_ = std::make_unique<MemoryController>(parent_);
    freezer_ = std::make_unique<FreezerController>(parent_);
    cpuacct_ = std::make_unique<CpuacctController>(parent_);
    all_ = {cpuset_.get(), memory_.get(), freezer_.get(), cpuacct_.get()};
  }
  std::string version() const override { return "v1"; }
  std::string describe() const override {
    std::string s = "v1:";
    for (auto* c : all_) s += " " + c->dir("");
    return s;
  }
  std::string parent() const override { return parent_; }

  void create(const std::string& slot, const SlotLimits& limits) override {
    check_slot(slot);
    try {
      for (auto* c : all_) c->prepare(slot, limits);
    } catch (...) {
      for (auto* c : all_) try { c->cleanup(slot); } catch (...) {}
      throw;
    }
  }
  // One mkdir per controller; only a leftover (EEXIST) costs a destroy and a second try.
  void create_fresh(const std::string& slot, const SlotLimits& limits) override {
    check_slot(slot);
    try {
      for (auto* c : all_) c->prepare(slot, limits, true);
      return;
    } catch (const SlotExists&) {
      destroy(slot);  // the leftover and what this call made so far
    } catch (...) {
      for (auto* c : all_) try { c->cleanup(slot); } catch (...) {}
      throw;
    }
    create(slot, limits);
  }
  void attach(const std::string& slot, pid_t pid) override {
    for (auto* c : all_) c->attach(slot, pid);
  }
  void freeze(const std::string& slot) override {
    freezer_->set(slot, "freezer.state", "FROZEN");
    // FREEZING until every task has stopped; wait (bounded), re-requesting as the kernel wants.
    for (int i = 0; i < 400; ++i) {
      if (freezer_->state(slot) == FreezeState::Frozen) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (i % 20 == 19) freezer_->set(slot, "freezer.state", "FROZEN");
    }
    throw CgroupError("freezer " + freezer_->dir(slot) + " did not reach FROZEN within 2 s");
  }
  void thaw(const std::string& slot) override { freezer_->set(slot, "freezer.state", "THAWED"); }
  std::int64_t oom_kills(const std::string& slot) const override { return memory_->oom_kills(slot); }
  FreezeState freezer_state(const std::string& slot) const override { return freezer_->state(slot); }

  std::vector<pid_t> pids(const std::string& slot) const override {
    std::set<pid_t> s;
    for (auto* c : all_)
      for (pid_t p : c->procs(slot)) s.insert(p);
    return {s.begin(), s.end()};
  }
  SlotUsage usage(const std::string& slot) const override {
    SlotUsage u;
    for (auto* c : all_) c->usage(slot, u);
    return u;
  }
  bool kill_all(const std::string& slot, int timeout_ms, pid_t spare) override {
    return kill_slot(*this, slot, timeout_ms, spare, [&] { return freezer_->exists(slot); }, [] { return false; });
  }
  void destroy(const std::string& slot) override {
    check_slot(slot);
    // The usual case, a slot whose job has ended and left nothing: its rmdirs alone (an rmdir only
    // removes an empty group: EBUSY means processes are left, so they are killed below first).
    bool left = false;
    for (auto* c : all_)
      if (::rmdir(c->dir(slot).c_str()) != 0 && errno != ENOENT) left = true;
    if (!left) return;
    if (!kill_all(slot, 5000, 0))
      throw CgroupError("slot " + slot + " still has processes after SIGKILL; not removed");
    if (freezer_->exists(slot) && freezer_->state(slot) != FreezeState::Thawed) thaw(slot);
    std::string errors;
    for (auto* c : all_) {
      try {
        c->cleanup(slot);
      } catch (const CgroupError& e) {
        errors += std::string(errors.empty() ? "" : "; ") + e.what();
      }
    }
    if (!errors.empty()) throw CgroupError(errors);
  }
  std::vector<std::string> list() const override {
    std::set<std::string> s;
    for (auto* c : all_)
      for (auto& n : c->children()) s.insert(n);
    return {s.begin(), s.end()};
  }
  bool has_slot(const std::string& slot) const override {
    for (auto* c : all_)
      if (c->exists(slot)) return true;
    return false;
  }
  std::string cpuset_path(const std::string& slot) const override { return cpuset_->dir(slot); }
  std::vector<std::string> procs_files(const std::string& slot) const override {
    check_slot(slot);
    std::vector<std::string> v;
    // v1 "tasks", not "cgroup.procs": writing "0" there moves only the writing thread, which
    // skips the kernel's global threadgroup rwsem (its write lock waits for an RCU grace period:
    // 0.3-0.5 ms, up to 4.6 ms, per cpuset join; bench/launch/RESULTS.md rounds 3-4). The joiner
    // is the server's vfork child, a single thread: the whole process moves.
    for (auto* c : all_) v.push_back(c->dir(slot) + "/tasks");
    return v;
  }
  void remove_parent() override {
    for (auto* c : all_) {
      if (!c->children().empty()) throw CgroupError(c->dir("") + " still has slots; not removed");
      if (c->exists("") && ::rmdir(c->dir("").c_str()) != 0 && errno != ENOENT)
        throw CgroupError("cannot remove " + c->dir("") + ": " + std::strerror(errno));
      c->parent_gone();
    }
  }

 private:
  std::string parent_;
  std::unique_ptr<CpusetController> cpuset_;
  std::unique_ptr<MemoryController> memory_;
  std::unique_ptr<FreezerController> freezer_;
  std::unique_ptr<CpuacctController> cpuacct_;
  std::vector<V1Controller*> all_;
};

}  // namespace

std::unique_ptr<CgroupBackend> make_cgroup_v1(const std::string& parent) {
  return std::make_unique<V1Backend>(parent);
}

bool cgroup_v1_available(std::string* why) {
  auto fail = [why](const std::string& s) {
    if (why) *why = s;
    return false;
  };
  if (geteuid() != 0) return fail("not root: cannot create cgroups");
  int rc = init_libcgroup();
  if (rc != 0) return fail(std::string("libcgroup cannot initialise: ") + cg_error(rc));
  for (const char* c : {"cpuset", "memory", "freezer", "cpuacct"})
    if (mount_point(c).empty()) return fail(std::string("cgroup v1 controller '") + c + "' is not mounted");
  return true;
}

bool cgroup_v1_mounted() {
  if (init_libcgroup() != 0) return false;
  for (const char* c : {"cpuset", "memory", "freezer", "cpuacct"})
    if (mount_point(c).empty()) return false;
  return true;
}

}  // namespace corral::node
