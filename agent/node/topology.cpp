#include "topology.hpp"

#include <hwloc.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

namespace corral::node {
namespace {

struct TopoHandle {
  hwloc_topology_t t = nullptr;
  TopoHandle() {
    if (hwloc_topology_init(&t) != 0) throw std::runtime_error("hwloc: cannot initialise a topology");
  }
  ~TopoHandle() { hwloc_topology_destroy(t); }
  TopoHandle(const TopoHandle&) = delete;
  TopoHandle& operator=(const TopoHandle&) = delete;
};

std::string human_size(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) { bytes /= 1024; ++u; }
  return std::to_string(bytes) + units[u];
}

std::string this_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// MemTotal from the kernel: the memory the node really has (hwloc may see less on VMs).
std::int64_t kernel_mem_mb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") return kb / 1024;
  }
  return 0;
}

// Fills cores/packages/numa/pus/caches from a loaded hwloc topology.
void fill_from_hwloc(hwloc_topology_t t, Topology& out) {
  out.packages = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
  out.numa_nodes = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
  out.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  // Some virtual machines expose PUs without cores: then each PU is a core.
  hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  int ncores = hwloc_get_nbobjs_by_type(t, core_type);
  for (int i = 0; i < ncores; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, core_type, static_cast<unsigned>(i));
    Core core;
    core.index = i;
    core.os_index = c->os_index == HWLOC_UNKNOWN_INDEX ? i : static_cast<int>(c->os_index);
    int numa = c->nodeset ? hwloc_bitmap_first(c->nodeset) : -1;
    core.numa = numa < 0 ? 0 : numa;
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, c);
    core.package = pkg ? static_cast<int>(pkg->logical_index) : 0;
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(t, c->cpuset, HWLOC_OBJ_PU, pu)) != nullptr)
      core.pus.push_back(static_cast<int>(pu->os_index));
    if (core.pus.empty()) core.pus.push_back(core.os_index);
    out.cores.push_back(std::move(core));
  }
  const hwloc_obj_type_t cache_types[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                          HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE};
  for (auto type : cache_types) {
    std::map<std::uint64_t, int> by_size;
    int n = hwloc_get_nbobjs_by_type(t, type);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t c = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i));
      by_size[c->attr->cache.size]++;
    }
    for (auto& [size, count] : by_size) {
      int depth = hwloc_get_type_depth(t, type);
      hwloc_obj_t first = hwloc_get_obj_by_depth(t, depth, 0);
      out.caches.push_back("L" + std::to_string(first->attr->cache.depth) + " " + human_size(size) + " x" +
                           std::to_string(count));
    }
  }
}

}  // namespace

std::vector<int> Topology::numa_ids() const {
  std::set<int> s;
  for (auto& c : cores) s.insert(c.numa);
  return {s.begin(), s.end()};
}

std::vector<int> Topology::cores_of_numa(int numa) const {
  std::vector<int> v;
  for (auto& c : cores)
    if (c.numa == numa) v.push_back(c.index);
  return v;
}

Topology discover(const std::string& jobfs_dir) {
  TopoHandle h;
  if (hwloc_topology_load(h.t) != 0)
    throw std::runtime_error(std::string("hwloc: cannot discover this machine: ") + std::strerror(errno));
  Topology out;
  out.source = "hwloc";
  out.hostname = this_hostname();
  fill_from_hwloc(h.t, out);
  out.mem_mb = kernel_mem_mb();
  if (out.mem_mb == 0) out.mem_mb = static_cast<std::int64_t>(hwloc_get_root_obj(h.t)->total_memory >> 20);
  if (!jobfs_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(jobfs_dir, ec);
    struct statvfs sv {};
    if (statvfs(jobfs_dir.c_str(), &sv) == 0)
      out.jobfs_mb = static_cast<std::int64_t>((static_cast<std::uint64_t>(sv.f_bavail) * sv.f_frsize) >> 20);
  }
  return out;
}

Topology load_xml(const std::string& path, std::int64_t mem_mb_override) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw std::runtime_error("topology XML " + path + ": " + std::strerror(errno));
  TopoHandle h;
  if (hwloc_topology_set_xml(h.t, path.c_str()) != 0)
    throw std::runtime_error("topology XML " + path + ": hwloc cannot read it: " + std::strerror(errno));
  if (hwloc_topology_load(h.t) != 0)
    throw std::runtime_error("topology XML " + path + ": not a valid hwloc topology");
  Topology out;
  out.source = "xml:" + path;
  hwloc_obj_t root = hwloc_get_root_obj(h.t);
  const char* host = hwloc_obj_get_info_by_name(root, "HostName");
  out.hostname = host ? host : std::filesystem::path(path).stem().string();
  fill_from_hwloc(h.t, out);
  if (out.cores.empty()) throw std::runtime_error("topology XML " + path + ": no cores or PUs in it");
  out.mem_mb = static_cast<std::int64_t>(root->total_memory >> 20);
  if (const char* mb = hwloc_obj_get_info_by_name(root, "CorralMemMB")) {  // written by export_xml()
    char* end = nullptr;
    long long v = std::strtoll(mb, &end, 10);
    if (end && *end == '\0' && v > 0) out.mem_mb = v;
  }
  if (mem_mb_override > 0) out.mem_mb = mem_mb_override;
  return out;
}

namespace {
std::string xml_of(TopoHandle& h) {
  char* buf = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(h.t, &buf, &len, 0) != 0 || !buf)
    throw std::runtime_error("hwloc: cannot export the topology as XML");
  std::string xml(buf, len > 0 ? static_cast<std::size_t>(len - 1) : 0);  // len counts the NUL
  hwloc_free_xmlbuffer(h.t, buf);
  return xml;
}
}  // namespace

std::string export_xml() {
  TopoHandle h;
  if (hwloc_topology_load(h.t) != 0) throw std::runtime_error("hwloc: cannot discover this machine");
  return xml_of(h);
}

std::string export_xml(const Topology& topo) {
  TopoHandle h;
  if (topo.source.rfind("xml:", 0) == 0) {
    std::string path = topo.source.substr(4);
    if (hwloc_topology_set_xml(h.t, path.c_str()) != 0)
      throw std::runtime_error("topology XML " + path + ": hwloc cannot read it: " + std::strerror(errno));
  } else if (topo.source == "declared" || topo.source == "emulated") {
    // The declared shape as an hwloc synthetic description (same numbering as declared()).
    const int ncores = static_cast<int>(topo.cores.size());
    const int packages = std::max(1, topo.packages), numa = std::max(1, topo.numa_nodes);
    if (ncores == 0 || ncores % numa != 0 || numa % packages != 0 || topo.pus % ncores != 0)
      throw std::runtime_error("declared topology: its shape cannot be written as hwloc XML");
    std::string synth = "pack:" + std::to_string(packages) + " numa:" + std::to_string(numa / packages) +
                        "(memory=" + std::to_string((topo.mem_mb << 20) / numa) + ") core:" +
                        std::to_string(ncores / numa) + " pu:" + std::to_string(topo.pus / ncores);
    if (hwloc_topology_set_synthetic(h.t, synth.c_str()) != 0)
      throw std::runtime_error("declared topology: hwloc refuses the shape '" + synth + "'");
  } else if (!topo.real()) {
    throw std::runtime_error("topology of unknown source '" + topo.source + "': cannot export it");
  }
  if (hwloc_topology_load(h.t) != 0) throw std::runtime_error("hwloc: cannot load the topology to export it");
  hwloc_obj_t root = hwloc_get_root_obj(h.t);
  if (!hwloc_obj_get_info_by_name(root, "HostName") && !topo.hostname.empty())
    hwloc_obj_add_info(root, "HostName", topo.hostname.c_str());
  // The memory Corral counts (the kernel's MemTotal for a discovered node: hwloc's NUMA memory
  // may be far below it on VMs); load_xml() takes it from here.
  if (topo.mem_mb > 0) hwloc_obj_add_info(root, "CorralMemMB", std::to_string(topo.mem_mb).c_str());
  return xml_of(h);
}

Topology declared(int packages, int cores_per_package, std::int64_t mem_mb, int numa_per_package,
                  int threads_per_core) {
  if (packages < 1 || cores_per_package < 1 || numa_per_package < 1 || threads_per_core < 1 || mem_mb < 0)
    throw std::runtime_error("declared topology: packages, cores per package, NUMA per package and threads "
                             "per core must be >= 1 and memory >= 0");
  if (cores_per_package % numa_per_package != 0)
    throw std::runtime_error("declared topology: " + std::to_string(cores_per_package) +
                             " cores per package do not split evenly into " + std::to_string(numa_per_package) +
                             " NUMA nodes");
  Topology out;
  out.source = "declared";
  out.hostname = this_hostname();
  out.packages = packages;
  out.numa_nodes = packages * numa_per_package;
  int per_numa = cores_per_package / numa_per_package;
  int ncores = packages * cores_per_package;
  out.pus = ncores * threads_per_core;
  for (int i = 0; i < ncores; ++i) {
    Core c;
    c.index = c.os_index = i;
    c.package = i / cores_per_package;
    c.numa = i / per_numa;
    for (int t = 0; t < threads_per_core; ++t) c.pus.push_back(i + t * ncores);  // Linux-style SMT numbering
    out.cores.push_back(std::move(c));
  }
  out.mem_mb = mem_mb;
  return out;
}

std::vector<int> pick_cores(const Topology& topo, const std::vector<int>& busy, int n) {
  if (n <= 0) return {};
  std::set<int> taken(busy.begin(), busy.end());
  std::map<int, std::vector<int>> free_by_numa;  // numa -> free core indices
  std::map<int, std::vector<int>> free_by_pkg;
  int total_free = 0;
  for (auto& c : topo.cores) {
    if (taken.count(c.index)) continue;
    free_by_numa[c.numa].push_back(c.index);
    free_by_pkg[c.package].push_back(c.index);
    ++total_free;
  }
  if (total_free < n) return {};
  auto best_fit = [n](const std::map<int, std::vector<int>>& groups) -> const std::vector<int>* {
    const std::vector<int>* best = nullptr;
    for (auto& [id, v] : groups)
      if (static_cast<int>(v.size()) >= n && (!best || v.size() < best->size())) best = &v;
    return best;
  };
  // 1. one NUMA node (memory stays local); 2. one package (shared L3 / socket).
  if (auto* v = best_fit(free_by_numa)) return {v->begin(), v->begin() + n};
  if (auto* v = best_fit(free_by_pkg)) return {v->begin(), v->begin() + n};
  // 3. span the fewest NUMA nodes: take the fullest free groups first.
  std::vector<const std::vector<int>*> groups;
  for (auto& [id, v] : free_by_numa) groups.push_back(&v);
  std::stable_sort(groups.begin(), groups.end(), [](auto* a, auto* b) { return a->size() > b->size(); });
  std::vector<int> out;
  for (auto* g : groups)
    for (int c : *g)
      if (static_cast<int>(out.size()) < n) out.push_back(c);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> pus_of(const Topology& topo, const std::vector<int>& cores) {
  std::vector<int> out;
  for (int i : cores) {
    if (i < 0 || i >= static_cast<int>(topo.cores.size()))
      throw std::runtime_error("core " + std::to_string(i) + " is not on this node (it has " +
                               std::to_string(topo.cores.size()) + " cores)");
    for (int p : topo.cores[static_cast<std::size_t>(i)].pus) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> numas_of(const Topology& topo, const std::vector<int>& cores) {
  std::set<int> s;
  for (int i : cores) {
    if (i < 0 || i >= static_cast<int>(topo.cores.size()))
      throw std::runtime_error("core " + std::to_string(i) + " is not on this node");
    s.insert(topo.cores[static_cast<std::size_t>(i)].numa);
  }
  return {s.begin(), s.end()};
}

std::string to_cpu_list(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string part;
  auto num = [&text](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9)
      throw std::runtime_error("bad CPU list '" + text + "'");
    return std::stoi(s);
  };
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front()))) part.erase(0, 1);
    if (part.empty()) continue;
    auto dash = part.find('-');
    if (dash == std::string::npos) {
      out.push_back(num(part));
    } else {
      int a = num(part.substr(0, dash)), b = num(part.substr(dash + 1));
      if (b < a) throw std::runtime_error("bad CPU list '" + text + "': range " + part + " goes down");
      for (int i = a; i <= b; ++i) out.push_back(i);
    }
  }
  return out;
}

std::string describe(const Topology& t) {
  std::ostringstream o;
  o << t.hostname << ": " << t.packages << (t.packages == 1 ? " package, " : " packages, ") << t.numa_nodes
    << " NUMA, " << t.cores.size() << " cores, " << t.pus << " PUs, " << t.mem_mb << " MB";
  if (t.jobfs_mb > 0) o << ", jobfs " << t.jobfs_mb << " MB";
  for (auto& c : t.caches) o << ", " << c;
  if (t.source == "emulated") o << " (emulated)";
  return o.str();
}

}  // namespace corral::node
