// corrald configuration: a `key = value` file (--config FILE), then
// command-line flags on top. Every key, its default and meaning is in
// agent/corrald.conf.example (the documented reference).
#pragma once

#include <csignal>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/names.hpp"

namespace corral::agent {

struct QueueDef {
  std::string name;
  int priority = 0;
  // Service units per cpu-hour (nci-pbs-policy.txt "Queue structure"); < 0: the policy's for
  // its name (express 3, normal 1, bonus 0), else 1.
  double charge = -1;
};

struct Config {
  bool standalone = false;
  bool foreground = true;                     // --daemon detaches
  bool recover = false;                       // --recover: load a damaged journal's intact entries
  std::string state_dir = "/var/lib/corral";
  std::string socket = "/run/corral/corrald.sock";
  std::string pub = "tcp://127.0.0.1:7461";  // "none": no publishing
  std::string log;                            // empty: stderr
  std::string cgroup_parent = "corral";
  std::string cgroup = "auto";                // auto | v1 | v2 (node::make_cgroup)
  bool strict = false;                        // refuse to start where cpus or memory are not enforced
  std::string node_state_dir = "/run/corral/node";
  std::string jobfs_root = "/var/tmp/corral/jobfs";
  std::string ckpt_root = "/var/tmp/corral/ckpt";
  std::string topology_xml;                   // stand-in topology (tests); empty: hwloc
  int declare_cores = 0;                      // >0: declared 1-package node of N cores
  // Non-empty: an emulated node of this shape ("cores=64,sockets=2,mem=256G,jobfs=1T"), whose
  // jobs are timers (agent/node/emulated.hpp); checked when set.
  std::string emulate;
  Policy policy = Policy::Easy;               // names: coordinator/names.hpp
  std::optional<Order> order;                 // unset: the policy's (fifo but for corral)
  // Grid Engine's reservation settings (sge6-reservation-backfill.txt section 3,
  // sched_conf(5)): at most max_reservation reservations a pass (the reserve
  // policy: -R y jobs only); default_duration plans a job without walltime
  // (not enforced; 0 = INFINITY, Grid Engine's default).
  int max_reservation = 1;
  std::int64_t default_duration = 0;          // s
  // DURATION_OFFSET: added to every job's planned duration, pending and running (the gross
  // time until its resources are free again); the specification's default.
  std::int64_t duration_offset = 60;          // s
  // Checkpoint-based backfilling (checkpoint-backfill-patent.zh.txt): a backfill candidate whose
  // planned duration exceeds split_threshold is planned at split_factor x it (unset: the policy's,
  // as `corral sim --split-factor`).
  std::optional<double> split_factor;
  std::int64_t split_threshold = 3600;        // s
  // MONITOR (section 2d): every pass's schedule lines appended to this file,
  // `::::::::` before each pass; empty: off. Like Grid Engine's, it is never
  // truncated: rotate it (SIGHUP reopens it).
  std::string monitor_file;
  std::vector<QueueDef> queues = {{"normal", 0}};  // first: the default queue
  double cycle_interval = 10;                 // s between scheduling passes while jobs wait
  double heartbeat_interval = 5;              // s between heartbeat events
  double usage_interval = 30;                 // s between usage events per running job
  double poll_interval = 1;                   // s between limit checks while jobs run
  std::int64_t default_walltime = 0;          // s, applied when a job gives none; 0: none
  bool require_walltime = false;              // NCI: walltime mandatory
  std::int64_t keep_ended = 10000;            // ended jobs kept for stat
  bool fsync = true;                          // journal fdatasync (off only for tests)
  std::string on_restart = "adopt";           // adopt | cleanup: running jobs after a crash
  // NCI policy stage (coordinator/nci): equal-access order, priority-run and
  // parallel-run suspension, resume of suspended jobs. Queue priorities are
  // the runpriorities (queues = express:2,normal:1,...).
  bool nci = false;
  std::vector<std::string> nci_require = {"walltime", "mem", "jobfs"};  // mandatory requests
  // NCI start window in seconds (NciConfig::window_wait): a job pending this
  // long must start, and starts within twice it (window_bound()); 0: the
  // window closes after NciConfig::window_cycles pending cycles instead.
  std::int64_t nci_start_window = 0;
  // NCI charging (nci = yes): the project plan file (docs/plan-file.md) whose `grant` lines set
  // each project's service units; empty: pba_plan's, if any (else no grants: charged, never moved).
  std::string nci_plan;
  // PBA (coordinator/pba, pba-synopsys-patent.txt): project allocations from a plan file
  // (docs/plan-file.md), pre-qualification, priority arithmetic, one-for-one preemption
  // of normal jobs for an allocated job pending longer than pba_preempt_after.
  bool pba = false;
  std::string pba_plan;                       // required with pba = yes
  bool pba_preempt = true;                    // PbaConfig::preempt
  std::int64_t pba_preempt_after = 300;       // s pending before an allocated job may preempt
  std::int64_t pba_max_requeues = 3;          // a job PBA preempted this often is not preempted again
  bool pba_require_project = true;            // jobs without -P fail pre-qualification (lowest queue)
  // How a job is stopped when a policy preempts it (Job::preempt): requeue (work lost, it waits
  // again) or suspend (frozen, resumed when its cores are free).
  // The node's default: a job's own choice (corral submit --preempt, CORRAL_PREEMPT, a
  // #CORRAL --preempt directive) wins.
  PreemptMode preempt_mode = PreemptMode::Requeue;
  // Cooperative checkpoint: the signal corrald sends the job (default SIGUSR1) and the grace
  // period in seconds it waits before stopping it.
  int checkpoint_signal = SIGUSR1;
  int checkpoint_grace = 30;                  // s
  // The local socket: members of this group (and root) are always served, even while other
  // users hold every connection an unprivileged user may have; "": root only.
  std::string operators;
  double client_timeout = 60;                 // s a connection may stay silent (not in `wait`)
  // The mesh (docs/mesh.md): its name (empty: no mesh), its 3 or 5 voters (host:port, the same
  // list in the same order on every node), this node's name (default: the host name) and the
  // host:port it listens on (one of voters).
  std::string mesh;
  std::vector<std::string> voters;
  std::string node_name;
  std::string listen;
  // The mesh's CURVE keys (docs/mesh.md, "Keys"): this node's secret key file, the file of
  // public keys let in; or mesh_insecure, no CURVE at all.
  std::string mesh_key;
  std::string mesh_allowed_keys;
  bool mesh_insecure = false;
  std::int64_t mesh_submit_wait = 10;         // s a submission waits for a coordinator to commit it

  // Not config keys: what the command line asked for, and warnings to print
  // (a deprecated key), "FILE:LINE: " before them when read from a file.
  std::vector<std::string> warnings;
  std::string config_file;                    // the file read ("" = built-in defaults)
  std::string export_topology;                // --export-topology FILE|-: write the XML and exit
};

// Read when no --config is given; a missing default file means the built-in defaults
// (a fresh install has none), while a file named with --config must exist.
inline constexpr const char* kDefaultConfigFile = "/etc/corral/corrald.conf";

// A signal by name (USR1, SIGUSR1, usr2, RTMIN+2) or number. Throws std::invalid_argument for an
// unknown name, a number out of range, and for KILL and STOP (a job cannot catch them).
int parse_signal(const std::string& text);
// "USR1", "RTMIN+2", or the number.
std::string signal_name(int sig);

// Every option corrald's parser accepts, as "--flag ARG" ("-h, --help" for
// one with two names): kUsage lists each one (tests).
std::vector<std::string> usage_flags();

// Reads `path` into cfg. Throws std::runtime_error("FILE:LINE: why") on an
// unknown key or a bad value.
void load_config_file(const std::string& path, Config& cfg);
// The same over a file's text; `name` stands for the file in the refusals.
void parse_config_text(const std::string& text, const std::string& name, Config& cfg);

// Sets one key (shared by the file and the flags). Throws std::invalid_argument.
void set_config_key(Config& cfg, const std::string& key, const std::string& value);

// Parses corrald's command line; --config is read first wherever it appears,
// then flags override it. Without --config (and without --no-config) the
// default file is read if it exists. Throws std::invalid_argument with a usage
// hint, std::runtime_error for an unreadable or bad config file.
// Returns false when --help was printed.
bool parse_args(int argc, char** argv, Config& cfg, const std::string& default_config = kDefaultConfigFile);

extern const char* const kUsage;

}  // namespace corral::agent
