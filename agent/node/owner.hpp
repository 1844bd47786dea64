// Whether a file or dir the agent has just made in a dir already belongs to
// a job's user and group, so that its chown can be left out (one system call
// less per launch for the agent's own user's jobs). Used for the scripts dir (daemon) and the checkpoint root
// (launcher).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>

namespace corral::node {

class NewFileOwner {
 public:
  // New entries are the agent's user's, and take its group unless `dir` is
  // setgid (checked once, again after forget(); unknown: not owned, so the
  // caller chowns as before).
  bool owned_by(const std::string& dir, uid_t uid, gid_t gid) {
    if (uid != euid_ || gid != egid_) return false;
    if (setgid_ < 0) {
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0) return false;
      setgid_ = (st.st_mode & S_ISGID) != 0;
    }
    return setgid_ == 0;
  }
  void forget() { setgid_ = -1; }  // the dir was made anew
  uid_t euid() const { return euid_; }

 private:
  const uid_t euid_ = ::geteuid();  // the agent's own ids never change while it runs
  const gid_t egid_ = ::getegid();
  int setgid_ = -1;  // is the dir setgid? -1: not checked yet
};

}  // namespace corral::node
