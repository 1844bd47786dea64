// Node topology: what this node offers to the scheduler.
// Discovered with hwloc (packages, NUMA nodes, cores, hardware threads, caches), memory from the
// kernel's own accounting (/proc/meminfo MemTotal: hwloc's NUMA memory can be far below the real
// total on VMs), jobfs capacity from statvfs of the scratch directory. A recorded hwloc XML or a
// declared shape can stand in for the real machine (tests, benchmarks, bigger simulated nodes).
// Errors (unreadable XML, bad shape) throw std::runtime_error with a message saying what and where.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corral::node {

struct Core {
  int index = 0;          // logical index 0..N-1 (what the scheduler and LaunchSpec::cores use)
  int os_index = 0;       // OS core id
  int numa = 0;           // OS index of the NUMA node holding it (cpuset.mems value)
  int package = 0;        // logical package index
  std::vector<int> pus;   // OS indices of its hardware threads (cpuset.cpus values)
};

struct Topology {
  std::string hostname;
  std::vector<Core> cores;
  int packages = 0;
  int numa_nodes = 0;
  int pus = 0;                       // hardware threads
  std::int64_t mem_mb = 0;
  std::int64_t jobfs_mb = 0;
  std::vector<std::string> caches;   // e.g. "L3 32MiB x2", "L2 1MiB x16"
  std::string source;                // "hwloc", "xml:<path>", "declared" or "emulated"

  bool real() const { return source == "hwloc"; }
  std::vector<int> numa_ids() const;                // distinct NUMA OS indices, ascending
  std::vector<int> cores_of_numa(int numa) const;   // core indices on that NUMA node
};

// The real machine. jobfs_dir: scratch directory whose filesystem holds job-private dirs
// (created if missing; jobfs_mb = 0 if it cannot be examined).
Topology discover(const std::string& jobfs_dir);

// A recorded topology (hwloc XML, as written by export_xml or `lstopo foo.xml`).
// mem_mb_override > 0 replaces the XML's memory total (recorded NUMA memory may be partial).
Topology load_xml(const std::string& path, std::int64_t mem_mb_override = 0);

// This machine as hwloc XML (what `lstopo --of xml` prints).
std::string export_xml();
// `topo` as hwloc XML, for load_xml(): the machine (source "hwloc"), the recorded XML it was
// loaded from, or the declared shape (hwloc synthetic). The root object carries HostName and
// CorralMemMB (the memory Corral counts; load_xml() reads it back).
std::string export_xml(const Topology& topo);

// A declared shape: packages x cores_per_package, numa_per_package NUMA nodes per package,
// threads_per_core hardware threads per core. Cores/PUs are numbered densely.
Topology declared(int packages, int cores_per_package, std::int64_t mem_mb,
                  int numa_per_package = 1, int threads_per_core = 1);

// Choose n whole cores among those not in `busy` (core indices), NUMA-local where possible:
// the NUMA node with the fewest free cores that still fits n (best fit, keeps big holes for big
// jobs); else the package; else the fewest NUMA nodes, fullest first. Empty if fewer than n free.
std::vector<int> pick_cores(const Topology& topo, const std::vector<int>& busy, int n);

// OS CPU ids (all PUs) and NUMA ids of a set of core indices, for cpuset.cpus / cpuset.mems.
std::vector<int> pus_of(const Topology& topo, const std::vector<int>& cores);
std::vector<int> numas_of(const Topology& topo, const std::vector<int>& cores);

// "0-3,8,10-11"; and back (throws on malformed text).
std::string to_cpu_list(std::vector<int> ids);
std::vector<int> parse_cpu_list(const std::string& text);

// One-line human summary: "host: 1 package, 1 NUMA, 2 cores, 2 PUs, 24105 MB, jobfs 81920 MB".
std::string describe(const Topology& topo);

}  // namespace corral::node
