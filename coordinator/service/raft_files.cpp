#include "coordinator/service/raft_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <typeinfo>

#include <msgpack.hpp>

namespace corral::service {
namespace {

constexpr std::uint32_t kFileVersion = 1;
constexpr std::size_t kMaxRecord = std::size_t{1} << 31;

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

// --- records: length, CRC32, MessagePack payload -----------------------------

std::uint32_t crc_of(const char* p, std::size_t n) {
  return static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

void put_be32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint32_t be32_at(std::string_view data, std::size_t pos) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(data[pos + i]);
  return v;
}

std::string framed(const msgpack::sbuffer& payload) {
  std::string out;
  put_be32(out, static_cast<std::uint32_t>(payload.size()));
  put_be32(out, crc_of(payload.data(), payload.size()));
  out.append(payload.data(), payload.size());
  return out;
}

// The payload of the record at `pos` when it verifies (its framed size in
// `size`), else nullopt.
std::optional<std::string_view> record_at(std::string_view data, std::size_t pos, std::size_t& size) {
  if (pos > data.size() || data.size() - pos < 8) return std::nullopt;
  std::size_t len = be32_at(data, pos);
  if (len == 0 || len > kMaxRecord || data.size() - pos - 8 < len) return std::nullopt;
  std::string_view payload = data.substr(pos + 8, len);
  if (crc_of(payload.data(), len) != be32_at(data, pos + 4)) return std::nullopt;
  size = 8 + len;
  return payload;
}

// The first offset after `from` where a record verifies, or npos.
std::size_t next_record(std::string_view data, std::size_t from) {
  std::size_t size = 0;
  for (std::size_t pos = from + 1; pos + 8 <= data.size(); ++pos)
    if (record_at(data, pos, size)) return pos;
  return std::string_view::npos;
}

// A payload as an array whose first element is `kind`; nullopt when it is not.
std::optional<msgpack::object_handle> unpack_kind(std::string_view payload, std::string_view kind,
                                                 std::size_t fields) {
  try {
    msgpack::object_handle oh = msgpack::unpack(payload.data(), payload.size());
    const msgpack::object& o = oh.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != fields) return std::nullopt;
    if (o.via.array.ptr[0].as<std::string>() != kind) return std::nullopt;
    return oh;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// --- files ---------------------------------------------------------------------

std::string read_all(const std::string& path) {
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

void write_fully(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write", path);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void sync_directory(const std::string& dir) {
  int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) fail("cannot open", dir);
  int rv = ::fsync(d);
  ::close(d);
  if (rv != 0) fail("cannot sync", dir);
}

// `data` becomes the whole of `path`, or (on failure) `path` stays as it was.
void replace_whole(const std::string& dir, const std::string& path, std::string_view data, bool sync) {
  std::string tmp = path + ".new";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", tmp);
  try {
    write_fully(fd, data, tmp);
    if (sync && ::fsync(fd) != 0) fail("cannot sync", tmp);
    int rv = ::close(fd);
    fd = -1;
    if (rv != 0) fail("cannot write", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot replace", path);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (sync) sync_directory(dir);
}

[[noreturn]] void damaged(const std::string& path, std::size_t offset, const std::string& what) {
  throw std::runtime_error("raft file " + path + " is damaged at byte offset " + std::to_string(offset) +
                           " (" + what + "); the files are left as they are");
}

// The one record a whole-file (term, snapshot) holds; nullopt when the file is absent.
std::optional<msgpack::object_handle> whole_record(const std::string& path, std::string_view kind,
                                                   std::size_t fields) {
  std::string data = read_all(path);
  if (data.empty()) return std::nullopt;
  std::size_t size = 0;
  auto payload = record_at(data, 0, size);
  if (!payload) damaged(path, 0, "the record does not verify");
  if (size != data.size()) damaged(path, size, std::to_string(data.size() - size) + " bytes after the record");
  auto oh = unpack_kind(*payload, kind, fields);
  if (!oh) damaged(path, 0, "not a " + std::string(kind) + " record");
  if (oh->get().via.array.ptr[1].as<std::uint32_t>() != kFileVersion)
    damaged(path, 0, "format version " + std::to_string(oh->get().via.array.ptr[1].as<std::uint32_t>()) +
                         ", this corrald reads " + std::to_string(kFileVersion));
  return oh;
}

std::string start_record(std::uint64_t first) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(3);
  pk.pack(std::string_view("start"));
  pk.pack(kFileVersion);
  pk.pack(first);
  return framed(b);
}

std::string entry_record(std::uint64_t index, const DiskEntry& e) {
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(5);
  pk.pack(std::string_view("entry"));
  pk.pack(index);
  pk.pack(e.term);
  pk.pack(e.type);
  pk.pack_bin(static_cast<std::uint32_t>(e.data.size()));
  pk.pack_bin_body(e.data.data(), static_cast<std::uint32_t>(e.data.size()));
  return framed(b);
}

}  // namespace

RaftFiles::RaftFiles(std::string dir, bool fsync) : dir_(std::move(dir)), fsync_(fsync) {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) fail("cannot create raft directory", dir_);
  struct stat st{};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail("not a directory:", dir_);
}

RaftFiles::~RaftFiles() {
  if (log_fd_ >= 0) ::close(log_fd_);
}

RaftDisk RaftFiles::load() {
  // A whole-file write cut short left its temp file: never used.
  for (const char* name : {"term", "snapshot", "log"}) ::unlink((path(name) + ".new").c_str());
  RaftDisk d;
  if (auto oh = whole_record(path("term"), "term", 4)) {
    const auto& a = oh->get().via.array;
    try {
      d.term = a.ptr[2].as<std::uint64_t>();
      d.vote = a.ptr[3].as<std::uint64_t>();
    } catch (const std::bad_cast&) {
      damaged(path("term"), 0, "a field of the wrong type");
    }
  }
  if (auto oh = whole_record(path("snapshot"), "snapshot", 7)) {
    const auto& a = oh->get().via.array;
    DiskSnapshot s;
    try {
      s.index = a.ptr[2].as<std::uint64_t>();
      s.term = a.ptr[3].as<std::uint64_t>();
      s.conf_index = a.ptr[4].as<std::uint64_t>();
      for (const auto& [id, address, role] :
           a.ptr[5].as<std::vector<std::tuple<std::uint64_t, std::string, int>>>())
        s.conf.push_back(Member{id, address, static_cast<Role>(role)});
      s.data = a.ptr[6].as<std::string>();
    } catch (const std::bad_cast&) {
      damaged(path("snapshot"), 0, "a field of the wrong type");
    }
    d.snapshot = std::move(s);
  }
  load_log(d);
  d.files = this;
  return d;
}

void RaftFiles::load_log(RaftDisk& d) {
  const std::string p = path("log");
  const std::string data = read_all(p);
  std::uint64_t after_snapshot = d.snapshot ? d.snapshot->index + 1 : 1;
  if (data.empty()) {  // a new member, or a log never written
    rewrite_log(after_snapshot, false);
    d.first_index = first_;
    return;
  }
  std::size_t size = 0;
  auto head = record_at(data, 0, size);
  auto start = head ? unpack_kind(*head, "start", 3) : std::nullopt;
  if (!start) damaged(p, 0, "no start record");
  try {
    first_ = start->get().via.array.ptr[2].as<std::uint64_t>();
  } catch (const std::bad_cast&) {
    damaged(p, 0, "a field of the wrong type");
  }
  std::size_t pos = size;
  while (pos < data.size()) {
    auto payload = record_at(data, pos, size);
    if (!payload) {
      std::size_t next = next_record(data, pos);
      if (next != std::string_view::npos)
        damaged(p, pos, std::to_string(next - pos) + " bytes do not verify");
      warning_ = "raft log " + p + ": cut off a torn tail of " + std::to_string(data.size() - pos) +
                 " bytes (the last write, cut short) after " + std::to_string(offsets_.size()) + " entries";
      break;
    }
    auto e = unpack_kind(*payload, "entry", 5);
    if (!e) damaged(p, pos, "not an entry record");
    const auto& a = e->get().via.array;
    const std::uint64_t want = first_ + offsets_.size();
    std::uint64_t index = 0;
    try {
      index = a.ptr[1].as<std::uint64_t>();
      d.entries.push_back(DiskEntry{a.ptr[2].as<std::uint64_t>(), a.ptr[3].as<unsigned short>(),
                                    a.ptr[4].as<std::string>()});
    } catch (const std::bad_cast&) {
      damaged(p, pos, "a field of the wrong type");
    }
    if (index != want)
      damaged(p, pos, "entry " + std::to_string(index) + " where " + std::to_string(want) + " belongs");
    offsets_.push_back(pos);
    pos += size;
  }
  size_ = pos;
  d.first_index = first_;
  open_log();
  if (size_ < data.size()) {  // cutting needs no free space: works on a full disk
    if (::ftruncate(log_fd_, static_cast<off_t>(size_)) != 0) fail("cannot cut the torn tail of", p);
    if (fsync_ && ::fdatasync(log_fd_) != 0) fail("cannot sync", p);
  }
  if (!d.snapshot) return;
  // A snapshot written just before a crash, the log not yet rewritten after
  // it: entries that do not lead up to it are dropped (never committed).
  const DiskSnapshot& s = *d.snapshot;
  if (first_ > s.index + 1)
    damaged(p, 0, "the log starts at entry " + std::to_string(first_) + ", after a snapshot of entry " +
                      std::to_string(s.index) + " with nothing between");
  std::uint64_t last = first_ + d.entries.size() - 1;
  bool leads_up = last >= s.index && (s.index < first_ || d.entries[s.index - first_].term == s.term);
  if (leads_up) return;
  rewrite_log(s.index + 1, false);
  d.entries.clear();
  d.first_index = first_;
}

void RaftFiles::open_log() {
  if (log_fd_ >= 0) ::close(log_fd_);
  log_fd_ = ::open(path("log").c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (log_fd_ < 0) fail("cannot open", path("log"));
}

void RaftFiles::rewrite_log(std::uint64_t new_first, bool keep_entries) {
  std::string out = start_record(new_first);
  const std::uint64_t header = out.size();
  std::vector<std::uint64_t> offsets;
  if (keep_entries && new_first < first_ + offsets_.size()) {
    std::uint64_t from = offsets_[new_first - first_];
    std::string tail(size_ - from, '\0');
    ssize_t n = ::pread(log_fd_, tail.data(), tail.size(), static_cast<off_t>(from));
    if (n < 0 || static_cast<std::size_t>(n) != tail.size()) fail("cannot read", path("log"));
    for (std::uint64_t i = new_first - first_; i < offsets_.size(); ++i)
      offsets.push_back(offsets_[i] - from + header);
    out += tail;
  }
  replace_whole(dir_, path("log"), out, fsync_);
  first_ = new_first;
  offsets_ = std::move(offsets);
  size_ = out.size();
  open_log();
}

void RaftFiles::check_usable() const {
  if (!broken_.empty()) throw std::runtime_error("raft files in " + dir_ + " refuse writes after: " + broken_);
}

void RaftFiles::save_term(std::uint64_t term, std::uint64_t vote) {
  check_usable();
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(4);
  pk.pack(std::string_view("term"));
  pk.pack(kFileVersion);
  pk.pack(term);
  pk.pack(vote);
  replace_whole(dir_, path("term"), framed(b), fsync_);
}

void RaftFiles::append(std::uint64_t index, const std::deque<DiskEntry>& entries) {
  check_usable();
  if (index != first_ + offsets_.size())
    throw std::runtime_error("raft log " + path("log") + ": entry " + std::to_string(index) +
                             " appended where " + std::to_string(first_ + offsets_.size()) + " belongs");
  std::string out;
  std::vector<std::uint64_t> offsets;
  for (const DiskEntry& e : entries) {
    offsets.push_back(size_ + out.size());
    out += entry_record(index++, e);
  }
  try {
    write_fully(log_fd_, out, path("log"));
    if (fsync_ && ::fdatasync(log_fd_) != 0) fail("cannot sync", path("log"));
  } catch (const std::exception& e) {
    // Nothing of a failed append stays: a partial record mid-file would read as damage later.
    if (::ftruncate(log_fd_, static_cast<off_t>(size_)) != 0) broken_ = e.what();
    throw;
  }
  offsets_.insert(offsets_.end(), offsets.begin(), offsets.end());
  size_ += out.size();
}

void RaftFiles::truncate(std::uint64_t index) {
  check_usable();
  if (index >= first_ + offsets_.size()) return;
  std::uint64_t keep = index > first_ ? index - first_ : 0;
  std::uint64_t at = keep < offsets_.size() ? offsets_[keep] : size_;
  if (::ftruncate(log_fd_, static_cast<off_t>(at)) != 0 || (fsync_ && ::fdatasync(log_fd_) != 0)) {
    broken_ = "cannot truncate " + path("log") + ": " + std::strerror(errno);
    check_usable();
  }
  offsets_.resize(keep);
  size_ = at;
}

void RaftFiles::put_snapshot(const DiskSnapshot& s, unsigned trailing) {
  check_usable();
  msgpack::sbuffer b;
  msgpack::packer<msgpack::sbuffer> pk(b);
  pk.pack_array(7);
  pk.pack(std::string_view("snapshot"));
  pk.pack(kFileVersion);
  pk.pack(s.index);
  pk.pack(s.term);
  pk.pack(s.conf_index);
  pk.pack_array(static_cast<std::uint32_t>(s.conf.size()));
  for (const Member& m : s.conf) pk.pack(std::make_tuple(m.id, m.address, static_cast<int>(m.role)));
  pk.pack_bin(static_cast<std::uint32_t>(s.data.size()));
  pk.pack_bin_body(s.data.data(), static_cast<std::uint32_t>(s.data.size()));
  // The snapshot first: a crash before the log is rewritten leaves a log that
  // still leads up to it (or that load() cuts back to it).
  replace_whole(dir_, path("snapshot"), framed(b), fsync_);
  std::uint64_t first = first_after_snapshot(first_, offsets_.size(), s.index, trailing);
  if (trailing == 0) rewrite_log(first, false);
  else if (first != first_) rewrite_log(first, true);
}

}  // namespace corral::service
