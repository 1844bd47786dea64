// A cgroup2 hierarchy for a test: mounted at a temporary directory beside v1 (the same unified
// tree as any other cgroup2 mount), else an existing mount; `why` says why neither is usable.
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace cgtest {

struct Cgroup2Mount {
  std::string path, why;
  bool mounted = false;
  Cgroup2Mount() {
    if (::geteuid() != 0) {
      why = "not root: cannot mount or write cgroup2";
      return;
    }
    char tmpl[] = "/tmp/corral-cgroup2-XXXXXX";
    if (::mkdtemp(tmpl) && ::mount("none", tmpl, "cgroup2", 0, nullptr) == 0) {
      path = tmpl;
      mounted = true;
      return;
    }
    std::string err = std::strerror(errno);
    ::rmdir(tmpl);
    std::ifstream in("/proc/self/mounts");
    std::string dev, mnt, type, rest;
    while (in >> dev >> mnt >> type && std::getline(in, rest))
      if (type == "cgroup2") path = mnt;
    if (path.empty()) why = "cannot mount cgroup2 (" + err + ") and none is mounted";
  }
  ~Cgroup2Mount() {
    if (!mounted) return;
    ::umount2(path.c_str(), MNT_DETACH);
    ::rmdir(path.c_str());
  }
  Cgroup2Mount(const Cgroup2Mount&) = delete;
  Cgroup2Mount& operator=(const Cgroup2Mount&) = delete;
  bool ok() const { return !path.empty(); }
};

}  // namespace cgtest
