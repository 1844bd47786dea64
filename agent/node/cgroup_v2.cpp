// The cgroup v2 (unified) backend: plain files under one tree, and corrald's place in it under
// systemd's delegation rules (systemd docs/CGROUP_DELEGATION.md: a delegated group's processes
// live in a leaf; its children are the delegatee's own).
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroup.hpp"
#include "cgroup_io.hpp"
#include "topology.hpp"

namespace corral::node {
namespace fs = std::filesystem;
namespace {
using namespace cgio;

// The controllers a slot needs: cpuset (cpus, mems), memory (limit, OOM), cpu (usage).
constexpr const char* kWanted[] = {"cpuset", "memory", "cpu"};

std::string find_cgroup2_mount() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, mnt, type, rest;
  while (in >> dev >> mnt >> type && std::getline(in, rest))
    if (type == "cgroup2") return mnt;
  return {};
}

// The names in a space-separated controller list (cgroup.controllers, cgroup.subtree_control;
// a leading '+' is dropped so a fake tree's file reads as the kernel's).
bool lists(const std::string& file, const std::string& ctrl) {
  std::istringstream in(read_file(file));
  std::string c;
  while (in >> c)
    if ((c[0] == '+' ? c.substr(1) : c) == ctrl) return true;
  return false;
}

// Enables for dir's children every wanted controller dir offers, in one write (a list naming one
// it does not offer is refused whole). Failing is not an error here: unenforced() reports it.
void enable_controllers(const std::string& dir) {
  std::string line;
  for (const char* c : kWanted)
    if (lists(dir + "/cgroup.controllers", c) && !lists(dir + "/cgroup.subtree_control", c))
      line += std::string(line.empty() ? "" : " ") + "+" + c;
  if (!line.empty()) write_file(dir + "/cgroup.subtree_control", line);
}

class V2Backend : public CgroupBackend {
 public:
  V2Backend(std::string parent, std::string mount, std::string base)
      : parent_(std::move(parent)), mount_(std::move(mount)), base_(std::move(base)) {
    check_parent(parent_);
    if (mount_.empty()) mount_ = find_cgroup2_mount();
    if (mount_.empty()) throw CgroupError("no cgroup2 filesystem is mounted");
    if (!base_.empty() && base_.front() != '/') base_ = "/" + base_;
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
    ensure_parent();
  }
  std::string version() const override { return "v2"; }
  std::string parent() const override { return parent_; }
  std::string describe() const override { return "v2: " + dir("") + note_; }
  void set_note(std::string n) { note_ = std::move(n); }
  std::string dir(const std::string& slot) const {
    return mount_ + base_ + "/" + parent_ + (slot.empty() ? "" : "/" + slot);
  }

  void create(const std::string& slot, const SlotLimits& l) override {
    check_slot(slot);
    ensure_parent();
    std::string d = dir(slot);
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
      throw CgroupError("cannot create " + d + ": " + std::strerror(errno));
    std::string err;
    auto must = [&](const std::string& file, const std::string& v) {
      if (!write_file(d + "/" + file, v, &err)) {
        ::rmdir(d.c_str());
        throw CgroupError(err);
      }
    };
    if (enabled("cpuset")) {
      if (!l.cpus.empty()) must("cpuset.cpus", to_cpu_list(l.cpus));
      if (!l.mems.empty()) must("cpuset.mems", to_cpu_list(l.mems));
    }
    if (enabled("memory") && l.mem_mb > 0) {
      must("memory.max", std::to_string(l.mem_mb * 1024 * 1024));
      if (fs::exists(d + "/memory.swap.max")) must("memory.swap.max", "0");  // swap is no way around it
      if (fs::exists(d + "/memory.oom.group")) must("memory.oom.group", "1");  // OOM takes the whole job
    }
  }
  void attach(const std::string& slot, pid_t pid) override {
    std::string err;
    if (!write_file(dir(slot) + "/cgroup.procs", std::to_string(pid), &err))
      throw CgroupError("cannot move pid " + std::to_string(pid) + ": " + err);
  }
  void freeze(const std::string& slot) override {
    std::string err;
    if (!write_file(dir(slot) + "/cgroup.freeze", "1", &err)) throw CgroupError(err);
    for (int i = 0; i < 400; ++i) {
      if (freezer_state(slot) == FreezeState::Frozen) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw CgroupError(dir(slot) + " did not freeze within 2 s");
  }
  void thaw(const std::string& slot) override {
    std::string err;
    if (!write_file(dir(slot) + "/cgroup.freeze", "0", &err)) throw CgroupError(err);
  }
  FreezeState freezer_state(const std::string& slot) const override {
    std::string want = read_file(dir(slot) + "/cgroup.freeze");
    if (want.empty()) return FreezeState::Unknown;
    bool frozen = keyed_value(read_file(dir(slot) + "/cgroup.events"), "frozen") != 0;
    if (frozen) return FreezeState::Frozen;
    return want[0] == '1' ? FreezeState::Freezing : FreezeState::Thawed;
  }
  std::vector<pid_t> pids(const std::string& slot) const override {
    std::vector<pid_t> out;
    std::ifstream in(dir(slot) + "/cgroup.procs");
    pid_t p;
    while (in >> p) out.push_back(p);
    return out;
  }
  SlotUsage usage(const std::string& slot) const override {
    SlotUsage u;
    std::string d = dir(slot);
    u.cpu_s = static_cast<double>(keyed_value(read_file(d + "/cpu.stat"), "usage_usec")) / 1e6;
    u.mem_mb = read_int(d + "/memory.current") >> 20;
    u.max_mem_mb = read_int(d + "/memory.peak") >> 20;
    std::string ev = read_file(d + "/memory.events");
    u.failcnt = keyed_value(ev, "max");
    u.oom_kills = keyed_value(ev, "oom_kill");
    return u;
  }
  std::int64_t oom_kills(const std::string& slot) const override {
    return keyed_value(read_file(dir(slot) + "/memory.events"), "oom_kill");
  }
  bool kill_all(const std::string& slot, int timeout_ms, pid_t spare) override {
    // cgroup.kill would take the spare too; otherwise freeze, kill, thaw as on v1.
    return kill_slot(
        *this, slot, timeout_ms, spare, [] { return true; },
        [&] { return spare == 0 && write_file(dir(slot) + "/cgroup.kill", "1"); });
  }
  void destroy(const std::string& slot) override {
    check_slot(slot);
    if (!fs::is_directory(dir(slot))) return;
    if (!kill_all(slot, 5000, 0)) throw CgroupError("slot " + slot + " still has processes after SIGKILL; not removed");
    if (::rmdir(dir(slot).c_str()) != 0 && errno != ENOENT)
      throw CgroupError("cannot remove " + dir(slot) + ": " + std::strerror(errno));
  }
  std::vector<std::string> list() const override {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir(""), ec))
      if (e.is_directory()) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string cpuset_path(const std::string& slot) const override { return dir(slot); }
  std::vector<std::string> procs_files(const std::string& slot) const override { return {dir(slot) + "/cgroup.procs"}; }
  void remove_parent() override {
    if (!list().empty()) throw CgroupError(dir("") + " still has slots; not removed");
    if (::rmdir(dir("").c_str()) != 0 && errno != ENOENT)
      throw CgroupError("cannot remove " + dir("") + ": " + std::strerror(errno));
  }
  std::vector<std::string> unenforced() const override {
    std::vector<std::string> out;
    auto why = [&](const char* ctrl) {
      std::string offered = trim(read_file(mount_ + base_ + "/cgroup.controllers"));
      return std::string("the ") + ctrl + " controller is not enabled for " + dir("") + " (" + mount_ + base_ +
             " offers: " + (offered.empty() ? "none" : offered) + ")";
    };
    if (!enabled("cpuset")) out.push_back("cpus: " + why("cpuset"));
    if (!enabled("memory")) out.push_back("memory: " + why("memory"));
    return out;
  }

 private:
  // A controller the slots get: enabled in the parent's subtree_control.
  bool enabled(const std::string& ctrl) const { return lists(dir("") + "/cgroup.subtree_control", ctrl); }
  void ensure_parent() {
    enable_controllers(mount_ + base_);
    if (::mkdir(dir("").c_str(), 0755) != 0 && errno != EEXIST)
      throw CgroupError("cannot create " + dir("") + ": " + std::strerror(errno));
    enable_controllers(dir(""));
  }
  std::string parent_, mount_, base_, note_;
};

}  // namespace

std::unique_ptr<CgroupBackend> make_cgroup_v2(const std::string& parent, const std::string& mount,
                                              const std::string& base) {
  return std::make_unique<V2Backend>(parent, mount, base);
}

bool cgroup_v2_available(std::string* why) {
  auto fail = [why](const std::string& s) {
    if (why) *why = s;
    return false;
  };
  if (geteuid() != 0) return fail("not root: cannot create cgroups");
  std::string m = find_cgroup2_mount();
  if (m.empty()) return fail("no cgroup2 filesystem is mounted");
  if (!fs::exists(m + "/cgroup.subtree_control")) return fail(m + " is not a cgroup2 root");
  return true;
}

std::string own_cgroup_v2(const std::string& text) {
  std::istringstream in(text.empty() ? read_file("/proc/self/cgroup") : text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return {};
}

bool cgroup_delegated(const std::string& dir) {
  for (const char* name : {"trusted.delegate", "user.delegate"}) {
    char v[8] = {};
    ssize_t n = ::getxattr(dir.c_str(), name, v, sizeof v - 1);
    if (n > 0) return v[0] == '1' || v[0] == 'y' || v[0] == 't';
  }
  return false;
}

void enter_delegated_leaf(const std::string& mount, const std::string& own, const std::string& leaf) {
  const std::string top = mount + (own == "/" ? "" : own), to = top + "/" + leaf;
  if (::mkdir(to.c_str(), 0755) != 0 && errno != EEXIST)
    throw CgroupError("cannot create " + to + ": " + std::strerror(errno));
  // Ours first; then whatever else systemd started there (a process may exit meanwhile: ESRCH).
  for (int round = 0; round < 10; ++round) {
    std::istringstream procs(read_file(top + "/cgroup.procs"));
    std::vector<std::string> left;
    for (std::string p; procs >> p;) left.push_back(p);
    if (left.empty()) return;
    for (const auto& p : left) {
      std::string err;
      if (!write_file(to + "/cgroup.procs", p, &err) && err.find(std::strerror(ESRCH)) == std::string::npos)
        throw CgroupError("cannot move process " + p + " into " + to + ": " + err);
    }
  }
  throw CgroupError(top + " keeps gaining processes; cannot leave it for " + to);
}

std::unique_ptr<CgroupBackend> make_cgroup_v2_delegated(const std::string& parent) {
  std::string mount = find_cgroup2_mount();
  if (mount.empty()) throw CgroupError("no cgroup2 filesystem is mounted");
  std::string own = own_cgroup_v2();
  if (own.empty() || own == "/") {
    auto b = std::make_unique<V2Backend>(parent, mount, "");
    b->set_note(" (this process is in the cgroup root)");
    return b;
  }
  if (!cgroup_delegated(mount + own)) {
    auto b = std::make_unique<V2Backend>(parent, mount, "");
    b->set_note(" (" + own + " is not delegated to this process (Delegate=yes): the slots are made beside "
                "systemd's groups, which systemd may reorganise)");
    return b;
  }
  enter_delegated_leaf(mount, own);
  auto b = std::make_unique<V2Backend>(parent, mount, own);
  b->set_note(" (delegated " + own + "; this process moved to " + own + "/corrald)");
  return b;
}

}  // namespace corral::node
