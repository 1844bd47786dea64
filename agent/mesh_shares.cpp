// A mesh job across nodes, on one of its nodes. The start names every node
// and its share (slots, memory); this node takes its own: its cgroups hold
// that many cores and that much memory (jobfs split the same way). The first
// node runs the script with the host list in CORRAL_NODEFILE and PBS_NODEFILE
// (one line per slot, as PBS writes it) and PE_HOSTFILE (Grid Engine's
// "host slots queue processor-range"); every other node holds its share for
// `corral exec` until the coordinator, once the job's end is committed, tells
// it to stop.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "agent/daemon.hpp"
#include "agent/mesh_link.hpp"
#include "agent/write_fully.hpp"

namespace corral::agent {

namespace {

bool write_host_file(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0) return false;
  bool ok = write_fully(fd, text);
  return ::close(fd) == 0 && ok;
}

std::int64_t share_part(std::int64_t whole, std::int64_t part, std::int64_t total) {
  return whole > 0 && total > 0 ? (whole * part + total - 1) / total : whole;
}

}  // namespace

std::string Daemon::mesh_share(JobRecord& rec, const proto::jobs::StartJob& s) {
  auto at = std::find(s.nodes.begin(), s.nodes.end(), node_name());
  if (at == s.nodes.end()) return "this node (" + node_name() + ") is not one of the job's nodes";
  const auto i = static_cast<std::size_t>(at - s.nodes.begin());
  std::vector<std::int32_t> slots = s.slots;
  if (slots.size() != s.nodes.size()) slots.assign(1, rec.spec.ncpus);  // one node: the whole job
  std::int64_t total = 0;
  for (std::int32_t sl : slots) total += sl;
  if (s.nodes.size() > 1) {
    rec.spec.ncpus = slots[i];
    rec.spec.mem_mb = i < s.mem_mb.size() ? s.mem_mb[i] : share_part(rec.spec.mem_mb, slots[i], total);
    rec.spec.jobfs_mb = share_part(rec.spec.jobfs_mb, slots[i], total);
    if (!rec.spec.pe.empty()) rec.spec.slots_min = rec.spec.slots_max = slots[i];
    rec.share = i > 0;
  }
  if (rec.share) {
    log_line("mesh: job " + std::to_string(rec.id) + " run " + std::to_string(s.run) + ": a share of " +
             std::to_string(slots[i]) + " cpus here, the script runs on " + s.nodes.front());
    return "";
  }
  // The host files, next to the script (root's 0711 directory: read by path only).
  std::string nodefile, pe_hostfile;
  for (std::size_t k = 0; k < s.nodes.size() && k < slots.size(); ++k) {
    for (std::int32_t n = 0; n < slots[k]; ++n) nodefile += s.nodes[k] + "\n";
    pe_hostfile += s.nodes[k] + " " + std::to_string(slots[k]) + " " + rec.spec.queue + "@" + s.nodes[k] +
                   " UNDEFINED\n";
  }
  std::string dir = cfg_.state_dir + "/scripts";
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) return "cannot make " + dir;
  std::string base = dir + "/" + std::to_string(rec.id);
  if (!write_host_file(base + ".nodes", nodefile) || !write_host_file(base + ".pe_hostfile", pe_hostfile))
    return "cannot write the job's host files under " + dir;
  for (const std::string& kv : {"CORRAL_NODEFILE=" + base + ".nodes", "PBS_NODEFILE=" + base + ".nodes",
                                "PE_HOSTFILE=" + base + ".pe_hostfile"}) {
    rec.env_blob += kv;
    rec.env_blob.push_back('\0');
  }
  return "";
}

void Daemon::remove_host_files(std::uint64_t id) {
  std::string base = cfg_.state_dir + "/scripts/" + std::to_string(id);
  ::unlink((base + ".nodes").c_str());
  ::unlink((base + ".pe_hostfile").c_str());
}

}  // namespace corral::agent
