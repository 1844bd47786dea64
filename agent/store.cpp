#include "agent/store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace corral::agent {
namespace {

struct Entry {
  std::string op;                // "put" | "del"
  std::uint64_t id = 0;
  std::uint64_t next_id = 1;
  JobRecord job;                 // for put
  MSGPACK_DEFINE_MAP(op, id, next_id, job)
};

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}
std::uint32_t get_u32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         std::uint32_t{u[3]};
}

std::string encode_entry(const Entry& e) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, e);
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(buf.size()));
  put_u32(out, static_cast<std::uint32_t>(
                   crc32(0, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(buf.size()))));
  out.append(buf.data(), buf.size());
  return out;
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

}  // namespace

Store::Store(std::string dir, bool fsync) : dir_(std::move(dir)), fsync_(fsync) {
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
  load();
}

Store::~Store() {
  try {
    flush();
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void Store::load() {
  int rfd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  std::string data;
  if (rfd >= 0) {
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(rfd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        ::close(rfd);
        fail("cannot read journal", path_);
      }
      if (n == 0) break;
      data.append(buf, static_cast<std::size_t>(n));
    }
    ::close(rfd);
  } else if (errno != ENOENT) {
    fail("cannot open journal", path_);
  }

  std::size_t pos = 0;
  while (data.size() - pos >= 8) {
    std::uint32_t len = get_u32(data.data() + pos), crc = get_u32(data.data() + pos + 4);
    if (len > proto::kMaxFrame * 2 || data.size() - pos - 8 < len) break;
    const char* p = data.data() + pos + 8;
    if (crc32(0, reinterpret_cast<const Bytef*>(p), len) != crc) break;
    Entry e;
    try {
      msgpack::object_handle oh = msgpack::unpack(p, len);
      oh.get().convert(e);
    } catch (const std::exception&) {
      break;
    }
    if (e.op == "put") {
      jobs_[e.job.id] = std::move(e.job);
    } else if (e.op == "del") {
      jobs_.erase(e.id);
    }
    if (e.next_id > next_id_) next_id_ = e.next_id;
    ++report_.entries;
    pos += 8 + len;
  }
  for (const auto& [id, j] : jobs_)
    if (id >= next_id_) next_id_ = id + 1;
  report_.jobs = jobs_.size();
  if (pos != data.size()) {
    report_.dropped_bytes = data.size() - pos;
    report_.warning = "journal " + path_ + ": cut off a torn/corrupt tail of " +
                      std::to_string(report_.dropped_bytes) + " bytes after " +
                      std::to_string(report_.entries) + " good entries";
  }
  entries_ = report_.entries;
  // Rewrite at once: drops a torn tail and starts from a compact file.
  compact();
}

void Store::append_entry(std::string_view op, const JobRecord* rec, std::uint64_t id) {
  Entry e;
  e.op = std::string(op);
  e.id = id;
  e.next_id = next_id_;
  if (rec) e.job = *rec;
  batch_ += encode_entry(e);
}

void Store::put(const JobRecord& rec) {
  if (&jobs_[rec.id] != &rec) jobs_[rec.id] = rec;
  append_entry("put", &rec, rec.id);
}

void Store::erase(std::uint64_t id) {
  if (jobs_.erase(id)) append_entry("del", nullptr, id);
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
  write_all(fd_, batch_, path_);
  if (sync && fsync_ && ::fdatasync(fd_) != 0) fail("cannot sync journal", path_);
  unsynced_ = !sync;
  std::size_t n = 0;
  for (std::size_t pos = 0; pos + 8 <= batch_.size(); ++n) pos += 8 + get_u32(batch_.data() + pos);
  entries_ += n;
  batch_.clear();
  if (entries_ > 4096 && entries_ > 4 * jobs_.size()) compact();
}

void Store::compact() {
  std::string tmp = path_ + ".new";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", tmp);
  std::string out;
  for (const auto& [id, j] : jobs_) {
    Entry e;
    e.op = "put";
    e.id = id;
    e.next_id = next_id_;
    e.job = j;
    out += encode_entry(e);
    if (out.size() > (1u << 20)) {
      write_all(fd, out, tmp);
      out.clear();
    }
  }
  if (jobs_.empty()) {  // keep next_id even with no job left
    Entry e;
    e.op = "del";
    e.next_id = next_id_;
    out += encode_entry(e);
  }
  write_all(fd, out, tmp);
  if (fsync_ && ::fsync(fd) != 0) {
    ::close(fd);
    fail("cannot sync", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) fail("cannot replace journal", path_);
  if (fsync_) sync_dir(dir_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open journal", path_);
  entries_ = jobs_.size() + (jobs_.empty() ? 1 : 0);
}

}  // namespace corral::agent
