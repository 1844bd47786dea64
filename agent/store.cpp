#include "agent/store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <stdexcept>

#include "agent/durable_file.hpp"
#include "agent/journal_format.hpp"

namespace corral::agent {

// The durable-file helpers (durable_file.hpp), shared with the charge ledger's file.
namespace durable {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  int err = errno;
  std::string msg = what + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) throw StoreFull(msg);
  throw std::runtime_error(msg);
}

void write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void sync_dir(const std::string& dir) {
  int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

// The whole file; "" when it does not exist.
std::string read_file(const std::string& path) {
  std::string data;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return data;
    fail("cannot open", path);
  }
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      fail("cannot read", path);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return data;
}

// Writes `data` to path through a synced temp file renamed into place; on failure the temp
// file is removed (never a partial file left) and the error thrown.
void replace_file(const std::string& dir, const std::string& path, std::string_view data, bool sync) {
  std::string tmp = path + ".new";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", tmp);
  try {
    write_all(fd, data, tmp);
    if (sync && ::fsync(fd) != 0) fail("cannot sync", tmp);
    if (::close(fd) != 0) {
      fd = -1;
      fail("cannot write", tmp);
    }
    fd = -1;
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot replace", path);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (sync) sync_dir(dir);
}

void append(int fd, std::string_view data, std::size_t size, bool sync, const std::string& what,
            const std::string& path) {
  try {
    write_all(fd, data, path);
    if (sync && ::fdatasync(fd) != 0) fail("cannot sync " + what, path);
  } catch (...) {
    int err = errno;
    (void)!::ftruncate(fd, static_cast<off_t>(size));
    errno = err;
    throw;
  }
}

std::string keep_copy(const std::string& dir, const std::string& path, bool sync) {
  char stamp[32];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::string copy = path + ".damaged-" + stamp;
  for (int i = 1; ::access(copy.c_str(), F_OK) == 0; ++i)
    copy = path + ".damaged-" + stamp + "-" + std::to_string(i);
  if (::link(path.c_str(), copy.c_str()) != 0) replace_file(dir, copy, read_file(path), sync);
  else if (sync) sync_dir(dir);
  return copy;
}

}  // namespace durable

namespace {

using journal::Entry;
using namespace durable;

// Ids reserved per write of the next_id file: one synced rename per this many submits.
constexpr std::uint64_t kIdBlock = 1000;

std::string id_list(const std::set<std::uint64_t>& ids) {
  std::string out;
  std::size_t n = 0;
  for (auto id : ids) {
    if (++n > 40) return out + " and " + std::to_string(ids.size() - 40) + " more";
    out += (out.empty() ? "" : ", ") + std::to_string(id);
  }
  return out;
}

// What a pass over the journal's bytes found.
struct Scan {
  std::vector<std::pair<std::size_t, std::size_t>> damaged;  // [from, to) that do not verify
  std::size_t torn_at = std::string::npos;                   // a torn tail from here
  std::set<std::uint64_t> seen, seen_after_damage;            // ids in intact entries
  bool has_base = false;
  std::vector<std::uint64_t> base_live;
  std::uint64_t base_next = 1;
};

}  // namespace

Store::Store(std::string dir, bool fsync, bool recover) : dir_(std::move(dir)), fsync_(fsync) {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) fail("cannot create state directory", dir_);
  struct stat st{};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail("not a directory:", dir_);
  // One agent per state directory: a second one would interleave journals.
  std::string lock = dir_ + "/lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) fail("cannot open", lock);
  // A POSIX record lock, not flock(): job shepherds are forked from the agent
  // and must not inherit (and keep) the lock after the agent dies.
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(lock_fd_, F_SETLK, &fl) != 0) {
    char pid[32] = {};
    (void)!::pread(lock_fd_, pid, sizeof pid - 1, 0);
    ::close(lock_fd_);
    throw std::runtime_error("state directory " + dir_ + " is in use by another corrald (pid " +
                             std::string(pid) + ")");
  }
  std::string me = std::to_string(::getpid());
  (void)!::ftruncate(lock_fd_, 0);
  (void)!::pwrite(lock_fd_, me.data(), me.size(), 0);
  path_ = dir_ + "/journal";
  try {
    load(recover);
  } catch (...) {
    if (fd_ >= 0) ::close(fd_);
    ::close(lock_fd_);
    throw;
  }
}

Store::~Store() {
  try {
    flush();
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void Store::load(bool recover) {
  // A compaction or id reservation cut short (crash, full disk) left a temp file: never used.
  ::unlink((path_ + ".new").c_str());
  ::unlink((dir_ + "/next_id.new").c_str());
  reserved_ = std::strtoull(read_file(dir_ + "/next_id").c_str(), nullptr, 10);
  const std::string data = read_file(path_);
  if (data.empty()) {  // a new state directory (or a journal never written to)
    next_id_ = std::max<std::uint64_t>(1, reserved_);
    compact();
    return;
  }
  Scan scan;
  std::size_t pos = 0;
  while (pos < data.size()) {
    Entry e;
    if (std::size_t n = journal::decode_at(data, pos, e)) {
      std::uint64_t id = e.op == "put" ? e.job.id : e.id;
      if (e.op == "put") jobs_[id] = std::move(e.job);
      else if (e.op == "del") jobs_.erase(id);
      else if (e.op == "base" && pos == 0) {
        scan.has_base = true;
        scan.base_live = std::move(e.live);
        scan.base_next = e.next_id;
      }
      if (e.op != "base") {
        scan.seen.insert(id);
        if (!scan.damaged.empty()) scan.seen_after_damage.insert(id);
      }
      next_id_ = std::max(next_id_, e.next_id);
      ++report_.entries;
      pos += n;
      continue;
    }
    // Nothing verifies after it: the last write was cut short (a torn tail), unless it is the
    // very start, which was written whole by a compaction.
    std::size_t next = journal::resync(data, pos + 1);
    if (next == std::string::npos && pos > 0) {
      scan.torn_at = pos;
      break;
    }
    scan.damaged.push_back({pos, next == std::string::npos ? data.size() : next});
    pos = next == std::string::npos ? data.size() : next;
  }
  for (const auto& [id, j] : jobs_) next_id_ = std::max(next_id_, id + 1);
  const std::uint64_t journal_next = next_id_;
  if (!scan.damaged.empty() || scan.torn_at != std::string::npos) next_id_ = std::max(next_id_, reserved_);
  report_.jobs = jobs_.size();
  entries_ = report_.entries;

  if (!scan.damaged.empty()) {
    const auto& [from, to] = scan.damaged.front();
    std::string where = "journal " + path_ + " is damaged at byte offset " + std::to_string(from) + " (" +
                        std::to_string(to - from) + " bytes do not verify" +
                        (scan.damaged.size() > 1 ? ", and " + std::to_string(scan.damaged.size() - 1) +
                                                       " more damaged places"
                                                 : std::string()) + ")";
    if (!recover) {
      std::string affected = scan.seen_after_damage.empty()
                                 ? "no intact entry after it names a job"
                                 : "intact entries after it name jobs " + id_list(scan.seen_after_damage);
      throw std::runtime_error(where + "; " + affected +
                               ". The file is left as it is; run corrald --recover to keep a copy "
                               "and restore every intact entry");
    }
    // Jobs a client may know that no intact entry holds; jobs last seen before the damage.
    std::set<std::uint64_t> expected;
    if (scan.has_base) expected.insert(scan.base_live.begin(), scan.base_live.end());
    for (std::uint64_t id = scan.has_base ? scan.base_next : 1; id < journal_next; ++id) expected.insert(id);
    for (auto id : expected)
      if (!scan.seen.count(id)) report_.lost.push_back(id);
    for (const auto& [id, j] : jobs_)
      if (!j.ended() && !scan.seen_after_damage.count(id)) report_.maybe_stale.push_back(id);
    for (const auto& [f, t] : scan.damaged) report_.dropped_bytes += t - f;
    keep_damaged_copy();
    report_.warning = where + "; recovered " + std::to_string(jobs_.size()) + " jobs from " +
                      std::to_string(report_.entries) + " intact entries; original kept as " +
                      report_.damaged_copy + "; new ids from " + std::to_string(next_id_);
    compact();
    return;
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open journal", path_);
  size_ = data.size();
  if (scan.torn_at != std::string::npos) {
    report_.dropped_bytes = data.size() - scan.torn_at;
    report_.warning = "journal " + path_ + ": cut off a torn tail of " + std::to_string(report_.dropped_bytes) +
                      " bytes (the last write, cut short) after " + std::to_string(report_.entries) +
                      " good entries; new ids from " + std::to_string(next_id_);
    // Cutting needs no free space: works on a full disk.
    if (::ftruncate(fd_, static_cast<off_t>(scan.torn_at)) != 0) fail("cannot cut the torn tail of", path_);
    if (fsync_) ::fdatasync(fd_);
    size_ = scan.torn_at;
  }
  if (entries_ > 4096 && entries_ > 4 * jobs_.size()) {
    try {
      compact();
    } catch (const StoreFull&) {  // stays as it is: intact, only longer
    }
  }
}

// The damaged original stays beside the restored journal: a hard link (no space needed), else
// a copy.
void Store::keep_damaged_copy() { report_.damaged_copy = keep_copy(dir_, path_, fsync_); }

std::uint64_t Store::next_id() {
  if (next_id_ >= reserved_) reserve_ids(next_id_ + kIdBlock);
  return next_id_++;
}

void Store::reserve_ids(std::uint64_t upto) {
  replace_file(dir_, dir_ + "/next_id", std::to_string(upto) + "\n", fsync_);
  reserved_ = upto;
}

void Store::append_entry(std::string_view op, const JobRecord* rec, std::uint64_t id) {
  Entry e;
  e.op = std::string(op);
  e.id = id;
  e.next_id = next_id_;
  if (rec) e.job = *rec;
  batch_.push_back({id, journal::encode(e)});
}

void Store::put(const JobRecord& rec) {
  if (&jobs_[rec.id] != &rec) jobs_[rec.id] = rec;
  next_id_ = std::max(next_id_, rec.id + 1);  // an adopted job the journal did not know
  append_entry("put", &rec, rec.id);
}

void Store::erase(std::uint64_t id) {
  if (jobs_.erase(id)) append_entry("del", nullptr, id);
}

void Store::withdraw(std::uint64_t id) {
  jobs_.erase(id);
  std::erase_if(batch_, [id](const Pending& p) { return p.id == id; });
}

JobRecord* Store::find(std::uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void Store::trim_ended(std::size_t keep) {
  std::size_t ended = 0;
  for (const auto& [id, j] : jobs_) ended += j.ended();
  if (ended <= keep) return;
  std::size_t drop = ended - keep;
  std::vector<std::uint64_t> victims;  // oldest ids first (map order)
  for (const auto& [id, j] : jobs_) {
    if (victims.size() == drop) break;
    if (j.ended()) victims.push_back(id);
  }
  for (auto id : victims) erase(id);
}

void Store::flush(bool sync) {
  if (sync && unsynced_ && batch_.empty()) {
    if (fsync_ && ::fdatasync(fd_) != 0) fail("cannot sync journal", path_);
    unsynced_ = false;
  }
  if (batch_.empty()) return;
  std::string out;
  for (const auto& p : batch_) out += p.bytes;
  append(fd_, out, size_, sync && fsync_, "journal", path_);
  size_ += out.size();
  unsynced_ = !sync;
  entries_ += batch_.size();
  batch_.clear();
  if (entries_ > 4096 && entries_ > 4 * jobs_.size()) {
    try {
      compact();
    } catch (const StoreFull&) {  // the journal as it is stays: intact, only longer
    }
  }
}

void Store::compact() {
  std::string out;
  Entry base;
  base.op = "base";
  base.next_id = next_id_;
  for (const auto& [id, j] : jobs_) base.live.push_back(id);
  out += journal::encode(base);
  for (const auto& [id, j] : jobs_) {
    Entry e;
    e.op = "put";
    e.id = id;
    e.next_id = next_id_;
    e.job = j;
    out += journal::encode(e);
  }
  replace_file(dir_, path_, out, fsync_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open journal", path_);
  size_ = out.size();
  entries_ = jobs_.size() + 1;
}

}  // namespace corral::agent
