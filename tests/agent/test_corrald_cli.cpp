// corrald's command line and config keys, and the commands that run without an agent
// (--help, --export-topology): the real corrald binary (CORRALD from the meson test env).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "agent/node/topology.hpp"
#include "harness.hpp"

using corral::agent::Config;
using corral::agent::parse_args;
using corral::agent::set_config_key;

namespace {
std::string corrald() { return harness::env_or("CORRALD", "build/agent/corrald"); }

bool parse(std::vector<std::string> args, Config& c, const std::string& default_config) {
  args.insert(args.begin(), "corrald");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_args(static_cast<int>(argv.size()), argv.data(), c, default_config);
}

struct Tmp {
  std::string path;
  Tmp() {
    path = "/tmp/corral-cli-XXXXXX";
    REQUIRE(::mkdtemp(path.data()));
  }
  ~Tmp() { (void)!std::system(("rm -rf '" + path + "'").c_str()); }
};
}  // namespace

TEST_CASE("config: checkpoint_signal by name or number and checkpoint_grace; bad values are clear errors", "[agent]") {
  Config c;
  CHECK(c.checkpoint_signal == SIGUSR1);  // the documented default
  CHECK(c.checkpoint_grace == 30);
  for (const char* v : {"USR2", "usr2", "SIGUSR2", "12"}) {
    set_config_key(c, "checkpoint_signal", v);
    CHECK(c.checkpoint_signal == SIGUSR2);
  }
  set_config_key(c, "checkpoint_signal", "TERM");
  CHECK(c.checkpoint_signal == SIGTERM);
  set_config_key(c, "checkpoint_signal", "RTMIN+2");
  CHECK(c.checkpoint_signal == SIGRTMIN + 2);
  CHECK(corral::agent::signal_name(SIGRTMIN + 2) == "RTMIN+2");
  CHECK(corral::agent::signal_name(SIGUSR1) == "USR1");
  set_config_key(c, "checkpoint_grace", "5");
  CHECK(c.checkpoint_grace == 5);
  set_config_key(c, "checkpoint_grace", "0");
  CHECK(c.checkpoint_grace == 0);

  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "USR3"),
                    Catch::Contains("checkpoint_signal: unknown signal 'USR3'"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "KILL"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "9"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "STOP"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "0"), Catch::Contains("not a signal number"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "999"), Catch::Contains("not a signal number"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "12x"), Catch::Contains("not a signal number"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "RTMIN+99"), Catch::Contains("real-time"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", ""), Catch::Contains("unknown signal"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_grace", "-1"), Catch::Contains("checkpoint_grace: expected a duration"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_grace", "2.5"), Catch::Contains("checkpoint_grace"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_grace", "9999999"), Catch::Contains("at most"));

  // In a file: the line is named.
  Tmp t;
  std::string f = t.path + "/c.conf";
  std::ofstream(f) << "checkpoint_signal = USR2\ncheckpoint_grace = 7\ncheckpoint_signal = HUPP\n";
  Config c2;
  CHECK_THROWS_WITH(corral::agent::load_config_file(f, c2), Catch::Contains(f + ":3: checkpoint_signal: unknown signal 'HUPP'"));
  CHECK(c2.checkpoint_signal == SIGUSR2);
  CHECK(c2.checkpoint_grace == 7);
}

TEST_CASE("config file: the default one is optional, a named one must exist", "[agent]") {
  Tmp t;
  std::string def = t.path + "/corrald.conf";  // stands in for /etc/corral/corrald.conf
  // Fresh install: no file at the default path -> built-in defaults, no error.
  Config c;
  REQUIRE(parse({"--standalone"}, c, def));
  CHECK(c.config_file.empty());
  CHECK(c.state_dir == "/var/lib/corral");
  // Once it exists it is read.
  std::ofstream(def) << "state_dir = /srv/corral\n";
  Config c2;
  REQUIRE(parse({"--standalone"}, c2, def));
  CHECK(c2.config_file == def);
  CHECK(c2.state_dir == "/srv/corral");
  // --no-config skips it.
  Config c3;
  REQUIRE(parse({"--standalone", "--no-config"}, c3, def));
  CHECK(c3.state_dir == "/var/lib/corral");
  // A file named with --config must exist: a clear error, never the defaults.
  Config c4;
  CHECK_THROWS_WITH(parse({"--config", t.path + "/missing.conf"}, c4, def),
                    Catch::Contains(t.path + "/missing.conf: cannot read config file: No such file or directory"));
  // The named file replaces the default one.
  std::ofstream(t.path + "/other.conf") << "socket = /tmp/o.sock\n";
  Config c5;
  REQUIRE(parse({"--config=" + t.path + "/other.conf"}, c5, def));
  CHECK(c5.socket == "/tmp/o.sock");
  CHECK(c5.state_dir == "/var/lib/corral");
  Config c6;
  CHECK_THROWS_WITH(parse({"--config", def, "--no-config"}, c6, def), Catch::Contains("not both"));
  // A default file that exists but cannot be read is an error, not the defaults.
  std::string dir = t.path + "/conf.d";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  Config c7;
  CHECK_THROWS_WITH(parse({}, c7, dir), Catch::Contains(dir + ": cannot read config file: it is a directory"));
  if (::geteuid() != 0) {
    ::chmod(def.c_str(), 0);
    CHECK_THROWS_WITH(parse({}, c7, def), Catch::Contains("cannot read config file"));
  }
  // Flags: a value where none is taken, none where one is needed.
  Config c8;
  CHECK_THROWS_WITH(parse({"--standalone=yes"}, c8, def), Catch::Contains("--standalone takes no value"));
  CHECK_THROWS_WITH(parse({"--ckpt-root"}, c8, def), Catch::Contains("--ckpt-root needs a value"));
  CHECK_THROWS_WITH(parse({"--no-such-flag"}, c8, def), Catch::Contains("unknown option '--no-such-flag'"));
  CHECK_THROWS_WITH(parse({"stray"}, c8, def), Catch::Contains("unexpected argument 'stray'"));
  CHECK_THROWS_WITH(parse({"--no-config", "--export-topology="}, c8, def), Catch::Contains("--export-topology needs a file"));
}

TEST_CASE("corrald --help lists every flag its parser accepts", "[agent]") {
  // The usage text against the parser's own options (config.cpp).
  std::string usage = corral::agent::kUsage;
  const std::vector<std::string> flags = corral::agent::usage_flags();
  REQUIRE(flags.size() > 10);
  for (const std::string& want : flags) {
    INFO("flag " << want);
    // As "  --flag ARG" (or "-h, --help") at the start of a usage line.
    bool listed = usage.find("  " + want + " ") != std::string::npos ||
                  usage.find(", " + want + " ") != std::string::npos ||
                  usage.find("  " + want + ",") != std::string::npos;
    CHECK(listed);
  }
  // And the binary prints that text.
  auto r = harness::run({corrald(), "--help"});
  CHECK(r.rc == 0);
  CHECK(r.out == usage);
}

TEST_CASE("corrald --export-topology writes hwloc XML that load_xml reads back", "[agent]") {
  Tmp t;
  // The discovered machine, to a file: same cores, PUs and memory as discover() says.
  std::string f = t.path + "/node.xml";
  auto r = harness::run({corrald(), "--no-config", "--export-topology", f});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.empty());
  auto real = corral::node::discover("");
  auto back = corral::node::load_xml(f);
  CHECK(back.cores.size() == real.cores.size());
  CHECK(back.pus == real.pus);
  CHECK(back.packages == real.packages);
  CHECK(back.mem_mb == real.mem_mb);  // the kernel's MemTotal, carried as CorralMemMB
  CHECK(back.hostname == real.hostname);

  // A declared node, to stdout.
  r = harness::run({corrald(), "--no-config", "--declare-cores", "6", "--export-topology", "-"});
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.find("<topology") != std::string::npos);
  std::ofstream(t.path + "/six.xml") << r.out;
  auto six = corral::node::load_xml(t.path + "/six.xml");
  CHECK(six.cores.size() == 6);
  CHECK(six.pus == 6);
  CHECK(six.mem_mb > 0);

  // A recorded topology stands in: exported as it is.
  std::string rec = std::string(NODE_TOPOLOGIES) + "/4numa-2x16.xml";
  r = harness::run({corrald(), "--no-config", "--set", "topology_xml=" + rec, "--export-topology", t.path + "/rec.xml"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  auto orig = corral::node::load_xml(rec);
  auto again = corral::node::load_xml(t.path + "/rec.xml");
  CHECK(again.cores.size() == orig.cores.size());
  CHECK(again.cores.size() == 32);
  CHECK(again.numa_nodes == orig.numa_nodes);
  CHECK(again.packages == orig.packages);

  // Errors: clear, non-zero, nothing half-written.
  r = harness::run({corrald(), "--no-config", "--export-topology", t.path + "/no/such/dir/x.xml"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("--export-topology: cannot write") != std::string::npos);
  r = harness::run({corrald(), "--no-config", "--topology-xml", t.path + "/missing.xml", "--export-topology", "-"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("missing.xml") != std::string::npos);
  struct stat st{};
  CHECK(::stat((t.path + "/no").c_str(), &st) != 0);
}

TEST_CASE("config: pba keys and preempt_mode; bad values are clear errors", "[agent]") {
  Config c;
  CHECK_FALSE(c.pba);
  CHECK(c.pba_preempt);
  CHECK(c.pba_preempt_after == 300);
  CHECK(c.pba_max_requeues == 3);
  CHECK(c.pba_require_project);
  CHECK(c.preempt_mode == corral::PreemptMode::Requeue);
  set_config_key(c, "pba", "yes");
  set_config_key(c, "pba_plan", "/etc/corral/projects.plan");
  set_config_key(c, "pba_preempt", "no");
  set_config_key(c, "pba_preempt_after", "0");
  set_config_key(c, "pba_max_requeues", "5");
  set_config_key(c, "pba_require_project", "no");
  set_config_key(c, "preempt_mode", "suspend");
  CHECK(c.pba);
  CHECK(c.pba_plan == "/etc/corral/projects.plan");
  CHECK_FALSE(c.pba_preempt);
  CHECK(c.pba_preempt_after == 0);
  CHECK(c.pba_max_requeues == 5);
  CHECK_FALSE(c.pba_require_project);
  CHECK(c.preempt_mode == corral::PreemptMode::Suspend);
  CHECK_THROWS_WITH(set_config_key(c, "pba", "maybe"), Catch::Contains("pba: expected yes or no"));
  CHECK_THROWS_WITH(set_config_key(c, "pba_preempt_after", "-5"), Catch::Contains("pba_preempt_after: expected a duration"));
  CHECK_THROWS_WITH(set_config_key(c, "pba_max_requeues", "x"), Catch::Contains("pba_max_requeues"));
  CHECK_THROWS_WITH(set_config_key(c, "preempt_mode", "checkpoint"),
                    Catch::Contains("preempt_mode: expected requeue or suspend, got 'checkpoint'"));
}

TEST_CASE("config: policy and order take the names of corral sim; backfill is read with a warning", "[agent]") {
  Config c;
  CHECK(c.policy == corral::Policy::Easy);
  CHECK_FALSE(c.order);
  for (std::string_view n : corral::kPolicyNames) {
    set_config_key(c, "policy", std::string(n));
    CHECK(corral::name(c.policy) == n);
  }
  for (std::string_view n : corral::kOrderNames) {
    set_config_key(c, "order", std::string(n));
    REQUIRE(c.order);
    CHECK(corral::name(*c.order) == n);
  }
  set_config_key(c, "order", "");
  CHECK_FALSE(c.order);  // empty: the policy's
  // An unknown order is an error naming the valid ones, never FIFO.
  CHECK_THROWS_WITH(set_config_key(c, "order", "random"),
                    Catch::Contains("order: unknown order 'random' (fifo, sjf, saf, wfp3, lxf, sjbf, lxbf)"));
  CHECK_THROWS_WITH(set_config_key(c, "policy", "magic"),
                    Catch::Contains("policy: unknown policy 'magic' (fcfs, easy, conservative, reserve, checkpoint, corral)"));
  CHECK(c.warnings.empty());

  Tmp t;
  const std::string f = t.path + "/c.conf";
  std::ofstream(f) << "# old name\nbackfill = conservative\n";
  Config old;
  corral::agent::load_config_file(f, old);
  CHECK(old.policy == corral::Policy::Conservative);
  REQUIRE(old.warnings.size() == 1);
  CHECK(old.warnings[0] == f + ":2: 'backfill' is deprecated: write 'policy = conservative' (the same names)");
  std::ofstream(f) << "order = fifo\norder = lifo\n";
  Config bad;
  CHECK_THROWS_WITH(corral::agent::load_config_file(f, bad), Catch::Contains(f + ":2: order: unknown order 'lifo'"));
  // Durations in the one grammar.
  set_config_key(c, "default_duration", "2w");
  CHECK(c.default_duration == 14 * 86400);
  set_config_key(c, "pba_preempt_after", "5m");
  CHECK(c.pba_preempt_after == 300);

  // The binary: the warning on stderr, the error with exit 2.
  std::ofstream(f) << "backfill = easy\n";
  auto r = harness::run({corrald(), "--config", f, "--export-topology", t.path + "/x.xml"});
  CHECK(r.rc == 0);
  CHECK(r.err.find("corrald: warning: " + f + ":1: 'backfill' is deprecated") != std::string::npos);
  std::ofstream(f) << "order = lifo\n";
  r = harness::run({corrald(), "--config", f, "--standalone"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("unknown order 'lifo' (fifo, sjf") != std::string::npos);
  r = harness::run({corrald(), "--no-config", "--policy", "corral", "--export-topology", t.path + "/y.xml"});
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
}

TEST_CASE("config: duration_offset, split_factor and split_threshold in names.hpp's grammar", "[agent]") {
  Config c;
  CHECK(c.duration_offset == 60);  // the specification's DURATION_OFFSET
  CHECK_FALSE(c.split_factor);     // the policy's
  CHECK(c.split_threshold == 3600);
  set_config_key(c, "duration_offset", "2m");
  set_config_key(c, "split_factor", "0.25");
  set_config_key(c, "split_threshold", "30m");
  CHECK(c.duration_offset == 120);
  CHECK(c.split_factor == 0.25);
  CHECK(c.split_threshold == 1800);
  set_config_key(c, "split_factor", "1");
  CHECK(c.split_factor == 1.0);
  for (const char* bad : {"0", "1.5", "-0.1", "x", ""})
    CHECK_THROWS_WITH(set_config_key(c, "split_factor", bad),
                      "split_factor: expected a number in (0, 1], got '" + std::string(bad) + "'");
  CHECK_THROWS_WITH(set_config_key(c, "split_threshold", "1x"), Catch::Contains("split_threshold: expected a duration"));
  CHECK_THROWS_WITH(set_config_key(c, "duration_offset", "-1"), Catch::Contains("duration_offset: expected a duration"));
}

TEST_CASE("queues NAME:PRIORITY:CHARGE and nci_plan: a queue's charge, the policy's by default", "[agent][cli]") {
  Config c;
  set_config_key(c, "queues", "normal:1,express:2:3.5,bonus");
  REQUIRE(c.queues.size() == 3);
  CHECK(c.queues[0].priority == 1);
  CHECK(c.queues[0].charge < 0);  // unset: the policy's for its name
  CHECK(c.queues[1].priority == 2);
  CHECK(c.queues[1].charge == 3.5);
  CHECK(c.queues[2].priority == 0);
  CHECK_THROWS_WITH(set_config_key(c, "queues", "normal:1:x"),
                    Catch::Contains("queues: expected a charge of 0 to 1000000 service units per cpu-hour, got 'x'"));
  CHECK_THROWS_WITH(set_config_key(c, "queues", "normal:1:-2"), Catch::Contains("got '-2'"));
  set_config_key(c, "nci_plan", "/etc/corral/grants.plan");
  CHECK(c.nci_plan == "/etc/corral/grants.plan");
}
