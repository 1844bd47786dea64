// What both cgroup backends share: control file I/O, the kill loop, slot names, the choice of
// backend and the enforcement check.
#include "cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroup_io.hpp"

namespace corral::node {
namespace cgio {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::int64_t read_int(const std::string& path) {
  std::string s = read_file(path);
  try {
    return s.empty() ? 0 : std::stoll(s);
  } catch (...) {
    return 0;
  }
}

std::int64_t keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  std::int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

bool write_file(const std::string& path, const std::string& value, std::string* err) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err) *err = path + ": " + std::strerror(errno);
    return false;
  }
  ssize_t n = ::write(fd, value.data(), value.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    if (err) *err = "cannot write '" + value + "' to " + path + ": " + std::strerror(e);
    return false;
  }
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

void check_slot(const std::string& slot) {
  if (slot.empty() || slot.find('/') != std::string::npos || slot == "." || slot == "..")
    throw CgroupError("bad slot name '" + slot + "'");
}

void check_parent(const std::string& parent) {
  if (parent.empty() || parent.find("..") != std::string::npos || parent.front() == '/')
    throw CgroupError("cgroup parent '" + parent + "' must be a relative group name like 'corral'");
}

bool kill_slot(CgroupBackend& cg, const std::string& slot, int timeout_ms, pid_t spare,
               const std::function<bool()>& freezable, const std::function<bool()>& kill_at_once) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto others = [&] {
    auto p = cg.pids(slot);
    p.erase(std::remove(p.begin(), p.end(), spare), p.end());
    return p;
  };
  while (true) {
    if (others().empty()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (!kill_at_once()) {
      bool frozen = false;
      if (freezable()) {
        try {
          cg.freeze(slot);
          frozen = true;
        } catch (const CgroupError&) {
        }
      }
      for (pid_t pid : others()) ::kill(pid, SIGKILL);
      if (frozen) cg.thaw(slot);
    }
    // Killed tasks leave the cgroup once the kernel has torn them down (zombies don't count).
    for (int i = 0; i < 50 && !others().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace cgio

std::unique_ptr<CgroupBackend> make_cgroup(const std::string& parent, const std::string& version) {
  if (version == "v1") return make_cgroup_v1(parent);
  if (version == "v2") return make_cgroup_v2_delegated(parent);
  if (version != "auto" && !version.empty())
    throw CgroupError("cgroup version '" + version + "': expected auto, v1 or v2");
  if (cgroup_v1_mounted()) return make_cgroup_v1(parent);
  return make_cgroup_v2_delegated(parent);
}

std::string check_enforcement(const CgroupBackend& backend, bool strict) {
  std::string gaps;
  for (const auto& g : backend.unenforced()) gaps += (gaps.empty() ? "" : "; ") + g;
  if (gaps.empty()) return {};
  if (strict)
    throw CgroupError("this node cannot enforce job limits (" + gaps +
                      "); refusing to start with strict = yes or nci = yes");
  return "job limits not enforced on this node: " + gaps;
}

const char* to_string(FreezeState s) {
  switch (s) {
    case FreezeState::Thawed: return "THAWED";
    case FreezeState::Freezing: return "FREEZING";
    case FreezeState::Frozen: return "FROZEN";
    default: return "UNKNOWN";
  }
}

std::string slot_name(std::uint64_t jobid) { return "job." + std::to_string(jobid); }

std::optional<std::uint64_t> slot_jobid(const std::string& slot) {
  if (slot.rfind("job.", 0) != 0 || slot.size() <= 4 || slot.size() > 24) return std::nullopt;
  std::string n = slot.substr(4);
  if (n.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(n);
}

std::vector<std::uint64_t> list_existing(const CgroupBackend& backend) {
  std::vector<std::uint64_t> out;
  for (auto& s : backend.list())
    if (auto id = slot_jobid(s)) out.push_back(*id);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace corral::node
