// The Launcher's lifecycle and what survives an agent restart: construction
// (the shepherd binary, the wake pipe), the job record files a restarted agent
// adopts jobs from, the removal of what an ended job left, and recover().
#include "launcher_impl.hpp"
#include "agent/node/mono_clock.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

namespace corral::node {
namespace fs = std::filesystem;
using namespace detail;

namespace detail {

std::string errstr(int e) { return std::strerror(e); }

bool executable_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

// A job's checkpoint/jobfs dir is usually empty when it goes: one rmdir, a walk only if not.
void remove_tree(const std::string& dir) {
  if (dir.empty() || ::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace detail

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '%') o += "%25";
    else if (c == '\n') o += "%0A";
    else o += c;
  }
  return o;
}
std::string unesc(const std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && s.compare(i, 3, "%25") == 0) { o += '%'; i += 2; }
    else if (s[i] == '%' && s.compare(i, 3, "%0A") == 0) { o += '\n'; i += 2; }
    else o += s[i];
  }
  return o;
}

}  // namespace

// ---- the Launcher's state --------------------------------------------------------------------

std::int64_t Launcher::now_ms() { return mono_ms(); }

Launcher::Launcher(Topology topo, LauncherConfig cfg, std::unique_ptr<CgroupBackend> cg) : impl_(new Impl) {
  impl_->topo = std::move(topo);
  impl_->cfg = std::move(cfg);
  if (impl_->cfg.hostname.empty()) impl_->cfg.hostname = impl_->topo.hostname;
  impl_->cg = cg ? std::move(cg) : make_cgroup(impl_->cfg.cgroup_parent, impl_->cfg.cgroup_version);
  std::error_code ec;
  fs::create_directories(impl_->cfg.state_dir, ec);
  if (ec) throw std::runtime_error("state dir " + impl_->cfg.state_dir + ": " + ec.message());
  ::chmod(impl_->cfg.state_dir.c_str(), 0700);
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe: " + errstr(errno));
  impl_->marks = static_cast<std::uint64_t>(now_ms()) ^ (static_cast<std::uint64_t>(::getpid()) << 40) ^
                 std::random_device{}();
  impl_->wake_r = p[0];
  impl_->wake_w = p[1];
  // Shepherds block rather than lose a record when the pipe is full; room for many records.
  ::fcntl(p[1], F_SETFL, 0);
  ::fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
  if (impl_->cfg.shepherd != "fork") impl_->find_shepherd();
  std::ifstream online("/sys/devices/system/cpu/online");
  std::string list;
  if (std::getline(online, list)) {
    try {
      impl_->real_cpus = parse_cpu_list(list);
    } catch (...) {
    }
  }
}

// The shepherd server binary: LauncherConfig::shepherd, else next to the running program (or in
// its node/ subdir), the build path, the install path. None found: "" (jobs are forked).
void Launcher::Impl::find_shepherd() {
  std::vector<std::string> cand;
  if (!cfg.shepherd.empty()) {
    cand.push_back(cfg.shepherd);
  } else {
    std::error_code ec2;
    fs::path self = fs::read_symlink("/proc/self/exe", ec2);
    if (!ec2) {
      cand.push_back((self.parent_path() / "corral-shepherd").string());
      cand.push_back((self.parent_path() / "node" / "corral-shepherd").string());
    }
#ifdef CORRAL_SHEPHERD_BUILD
    cand.push_back(CORRAL_SHEPHERD_BUILD);
#endif
#ifdef CORRAL_SHEPHERD_INSTALL
    cand.push_back(CORRAL_SHEPHERD_INSTALL);
#endif
  }
  for (auto& c : cand)
    if (detail::executable_file(c)) {
      shepherd = c;
      break;
    }
  if (shepherd.empty() && !cfg.shepherd.empty())
    throw std::runtime_error("shepherd " + cfg.shepherd + " is not an executable file");
}

Launcher::~Launcher() {
  impl_->tidy();
  impl_->stop_server();
  for (auto& [id, j] : impl_->jobs)
    if (j.pidfd >= 0) ::close(j.pidfd);
  if (impl_->wake_r >= 0) ::close(impl_->wake_r);
  if (impl_->wake_w >= 0) ::close(impl_->wake_w);
}

const Topology& Launcher::topology() const { return impl_->topo; }
CgroupBackend& Launcher::cgroups() { return *impl_->cg; }
int Launcher::wake_fd() const { return impl_->wake_r; }
bool Launcher::has(std::uint64_t id) const { return impl_->jobs.count(id) > 0; }

std::vector<std::uint64_t> Launcher::jobs() const {
  std::vector<std::uint64_t> v;
  for (auto& [id, j] : impl_->jobs) v.push_back(id);
  return v;
}

// ---- job records: what a restarted agent adopts a job from ----------------------------------

void Launcher::Impl::save_record(std::uint64_t id, Job& j) {
  std::string text;
  text.reserve(320);
  auto kv = [&text](const char* k, const std::string& v) {
    text += k;
    text += '=';
    text += v;
    text += '\n';
  };
  kv("id", std::to_string(id));
  kv("pid", std::to_string(j.shepherd));
  kv("uid", std::to_string(j.spec.uid));
  kv("gid", std::to_string(j.spec.gid));
  kv("user", esc(j.spec.user));
  kv("walltime_s", std::to_string(j.spec.walltime_s));
  kv("mem_mb", std::to_string(j.spec.mem_mb));
  kv("jobfs_mb", std::to_string(j.spec.jobfs_mb));
  kv("jobfs_dir", esc(j.jobfs_dir));
  kv("ckpt_dir", esc(j.ckpt_dir));
  kv("own_ckpt_dir", j.own_ckpt_dir ? "1" : "0");
  kv("ckpt_signal", std::to_string(j.spec.ckpt_signal));
  kv("ckpt_grace_s", std::to_string(j.spec.ckpt_grace_s));
  std::string cores;  // what a restarted agent that lost its journal needs to adopt the job
  for (int c : j.spec.cores) cores += (cores.empty() ? "" : ",") + std::to_string(c);
  kv("cores", cores);
  kv("suspended", j.suspended ? "1" : "0");
  kv("acc_ms", std::to_string(j.acc_ms));
  kv("run_started_ms", std::to_string(j.run_started_ms));
  kv("ckpt_deadline_ms", std::to_string(j.ckpt_deadline_ms));
  if (j.server > 0) kv("server", std::to_string(j.server));
  kv("served", j.served ? "1" : "0");
  std::string final_path = record_path(id);
  // The first record of a run is created whole by one write (O_EXCL: no earlier file there). A
  // reader can see no file or an empty or cut one only if the agent died inside these calls,
  // and load_record() refuses those, which is what a missing record gives (the slot is
  // cleaned, not adopted): no temp file and rename needed. A later record replaces an existing
  // one, so it is written whole to a temp file, then renamed: a reader never sees half of it.
  if (j.rec_sec == 0) {  // splitmix64: a fresh mark per run, never 0
    std::uint64_t z = (marks += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    j.rec_sec = static_cast<std::int64_t>(1 + (z >> 33));
    j.rec_nsec = static_cast<std::int64_t>(z % 1000000000ULL);
  }
  const struct timespec mark[2] = {{0, UTIME_OMIT}, {j.rec_sec, j.rec_nsec}};
  if (!j.rec_written) {
    int fd = ::open(final_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                ::futimens(fd, mark) == 0;
      ::close(fd);
      if (ok) {
        j.rec_written = true;
        return;
      }
    }
  }
  std::string tmp = final_path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::futimens(fd, mark) == 0;
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), final_path.c_str()) == 0) {
    j.rec_written = true;
  } else {
    ::unlink(tmp.c_str());
  }
}

std::optional<Launcher::Impl::Job> Launcher::Impl::load_record(std::uint64_t id) const {
  std::ifstream in(record_path(id));
  if (!in) return std::nullopt;
  std::map<std::string, std::string> kv;
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = unesc(line.substr(eq + 1));
  }
  Job j;
  try {
    j.spec.id = id;
    j.shepherd = std::stoi(kv.at("pid"));
    j.spec.uid = static_cast<uid_t>(std::stoul(kv.at("uid")));
    j.spec.gid = static_cast<gid_t>(std::stoul(kv.at("gid")));
    j.spec.user = kv["user"];
    j.spec.walltime_s = std::stoll(kv.at("walltime_s"));
    j.spec.mem_mb = std::stoll(kv.at("mem_mb"));
    j.spec.jobfs_mb = std::stoll(kv.at("jobfs_mb"));
    j.jobfs_dir = kv["jobfs_dir"];
    j.ckpt_dir = kv["ckpt_dir"];
    j.own_ckpt_dir = kv["own_ckpt_dir"] == "1";
    j.spec.ckpt_signal = std::stoi(kv.at("ckpt_signal"));
    j.spec.ckpt_grace_s = std::stoi(kv.at("ckpt_grace_s"));
    for (std::size_t p = 0; p < kv["cores"].size();) {  // absent in records of older agents
      std::size_t e = kv["cores"].find(',', p);
      if (e == std::string::npos) e = kv["cores"].size();
      j.spec.cores.push_back(std::stoi(kv["cores"].substr(p, e - p)));
      p = e + 1;
    }
    j.suspended = kv["suspended"] == "1";
    j.acc_ms = std::stoll(kv.at("acc_ms"));
    j.run_started_ms = std::stoll(kv.at("run_started_ms"));
    // A checkpoint in progress when the agent died still ends at its deadline.
    if (kv.count("ckpt_deadline_ms")) j.ckpt_deadline_ms = std::stoll(kv["ckpt_deadline_ms"]);
    // The last line: a record cut short (the agent died inside its first write) is refused.
    j.served = kv.at("served") == "1";
    if (kv.count("server")) j.server = std::stoi(kv["server"]);
    j.rec_written = true;
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable record: the job is cleaned up instead of adopted
  }
  return j;
}

// The job's raw wait status as the shepherd recorded it, if it did.
std::optional<int> Launcher::Impl::read_exit(std::uint64_t id) const {
  int fd = ::open(exit_path(id).c_str(), O_RDONLY | O_CLOEXEC);  // read once per job end: no stream
  if (fd < 0) return std::nullopt;
  char buf[32];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf - 1)) < 0 && errno == EINTR) {}
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  char* end = nullptr;
  errno = 0;
  long st = std::strtol(buf, &end, 10);
  if (end == buf || errno != 0 || st < INT_MIN || st > INT_MAX) return std::nullopt;
  return static_cast<int>(st);
}

namespace {
// Alive and not a zombie (a server let go by a launcher in this process is a zombie once it exits).
bool running(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string st;
  std::getline(in, st);
  auto close = st.rfind(')');
  return close != std::string::npos && close + 2 < st.size() && st[close + 2] != 'Z' && st[close + 2] != 'X';
}
}  // namespace

bool Launcher::Impl::await_requested(std::uint64_t id, const Job& rec) const {
  // A server starts a request within milliseconds; a few seconds cover a loaded machine. A
  // request that never went out (the agent died before sending it) costs that wait once.
  for (int i = 0; i < 300 && running(rec.server); ++i) {
    if (!cg->pids(slot(id)).empty() || read_exit(id)) return true;
    if (fs::exists(fail_path(id))) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !cg->pids(slot(id)).empty() || read_exit(id).has_value();
}

bool Launcher::Impl::await_status(std::uint64_t id, const Job& rec) const {
  // The server writes a job's status while the job is a zombie and reaps it only then: as long as
  // the server runs and the pid is still there, the status is on its way.
  for (int i = 0; i < 300 && running(rec.server); ++i) {
    if (read_exit(id)) return true;
    if (::kill(rec.shepherd, 0) != 0 && errno == ESRCH) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return read_exit(id).has_value();
}

// ---- cleanup ---------------------------------------------------------------------------------

// Remove everything a job left: cgroups, jobfs, (ckpt dir if terminal), record, exit file.
std::string Launcher::Impl::cleanup(std::uint64_t id, const Job& j, bool terminal) {
  std::string err;
  try {
    cg->destroy(slot(id));
  } catch (const std::exception& e) {
    err = e.what();
  }
  // A served job just killed: its server writes the exit file before it reaps the job; wait
  // (briefly) for that, so the file is not written after it was removed here.
  if (j.served && j.pid_known && !j.launch_failed && j.shepherd > 0 && !j.end_seen && !read_exit(id))
    for (int i = 0; i < 500 && !served_gone(j); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::error_code ec;
  remove_tree(j.jobfs_dir);
  if (terminal && j.own_ckpt_dir && !cfg.keep_ckpt_on_end) remove_tree(j.ckpt_dir);
  fs::remove(record_path(id), ec);
  fs::remove(exit_path(id), ec);
  if (j.launch_failed) fs::remove(fail_path(id), ec);
  return err;
}

// Runs the deferred cleanups (all, or only job `only`); returns the failures.
std::vector<std::string> Launcher::Impl::tidy(std::uint64_t only) {
  std::vector<std::string> errs;
  for (auto it = untidy.begin(); it != untidy.end();) {
    if (only != 0 && it->id != only) {
      ++it;
      continue;
    }
    std::string err = cleanup(it->id, it->job, it->terminal);
    if (!err.empty()) errs.push_back("job " + std::to_string(it->id) + ": cleanup: " + err);
    it = untidy.erase(it);
  }
  return errs;
}

std::vector<std::string> Launcher::tidy() { return impl_->tidy(); }

std::optional<LaunchSpec> Launcher::spec(std::uint64_t id) const {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return std::nullopt;
  return it->second.spec;
}

std::vector<Recovered> Launcher::recover(RecoverMode mode) {
  Impl& I = *impl_;
  I.tidy();  // slots of jobs already reported ended are not leftovers
  std::vector<Recovered> out;
  std::set<std::uint64_t> seen;
  std::error_code ec;
  for (std::uint64_t id : list_existing(*I.cg)) {
    if (I.jobs.count(id)) continue;
    seen.insert(id);
    auto rec = I.load_record(id);
    bool alive = !I.cg->pids(I.slot(id)).empty();
    bool has_exit = I.read_exit(id).has_value();
    // Asked of the server, no pid recorded (the agent died before the server's report): the
    // job may be starting still; it is adopted once it runs, never killed and started again.
    if (mode == RecoverMode::Adopt && rec && rec->served && rec->shepherd <= 0 && !alive && !has_exit &&
        I.await_requested(id, *rec)) {
      alive = !I.cg->pids(I.slot(id)).empty();
      has_exit = I.read_exit(id).has_value();
    }
    // Its process has left the cgroups (exited) but its status is not written yet: caught between
    // the two, it ended and must not be taken for lost (and run again).
    if (mode == RecoverMode::Adopt && rec && rec->served && rec->shepherd > 0 && !alive && !has_exit)
      has_exit = I.await_status(id, *rec);
    if (mode == RecoverMode::Adopt && rec && (alive || has_exit)) {
      Impl::Job j = std::move(*rec);
      int st = 0;
      // Still our child if this process started it (a pid of 0 would wait for any child).
      pid_t r = j.shepherd > 0 ? ::waitpid(j.shepherd, &st, WNOHANG) : -1;
      j.our_child = r == 0;
      if (r == j.shepherd) {
        j.reaped = true;
        j.shepherd_status = st;
      }
      if (j.suspended && I.cg->freezer_state(I.slot(id)) != FreezeState::Frozen) {
        j.suspended = false;
        j.run_started_ms = now_ms();
      }
      I.jobs.emplace(id, std::move(j));
      out.push_back({id, true, alive ? "adopted: still running" : "adopted: ended while unwatched"});
      continue;
    }
    Impl::Job j = rec ? std::move(*rec) : Impl::Job{};
    std::string err = I.cleanup(id, j, true);
    fs::remove(I.fail_path(id), ec);  // a launch that failed while nobody watched: started again
    if (j.our_child && j.shepherd > 0) ::waitpid(j.shepherd, nullptr, WNOHANG);
    out.push_back({id, false,
                   std::string(rec ? "killed and removed" : "no record: killed and removed") +
                       (err.empty() ? "" : "; " + err)});
  }
  // Records without a slot (agent died between writing the record and creating cgroups).
  for (auto& e : fs::directory_iterator(I.cfg.state_dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("job.", 0) != 0) continue;
    auto dot = n.find('.', 4);
    if (dot == std::string::npos) continue;
    auto id = slot_jobid(n.substr(0, dot));
    if (!id || I.jobs.count(*id) || seen.count(*id)) continue;
    if (auto rec = I.load_record(*id)) {
      std::error_code ec2;
      if (!rec->jobfs_dir.empty()) fs::remove_all(rec->jobfs_dir, ec2);
    }
    fs::remove(e.path(), ec);
  }
  return out;
}

void Launcher::stop_all() {
  for (auto& [id, j] : impl_->jobs) impl_->kill_job(id, j, EndReason::Cancelled, "cancelled: agent shutting down");
  for (int i = 0; i < 100 && !impl_->jobs.empty(); ++i) {
    poll();
    if (!impl_->jobs.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->tidy();
}

}  // namespace corral::node
