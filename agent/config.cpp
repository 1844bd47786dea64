#include "agent/config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "agent/node/emulated.hpp"
#include "tools/cli_args.hpp"
#include "tools/cli_error.hpp"

namespace corral::agent {
namespace {

std::string trim(const std::string& s) {
  std::size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  std::size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

bool to_bool(const std::string& k, const std::string& v) {
  if (v == "yes" || v == "true" || v == "1" || v == "on") return true;
  if (v == "no" || v == "false" || v == "0" || v == "off") return false;
  throw std::invalid_argument(k + ": expected yes or no, got '" + v + "'");
}

double to_seconds(const std::string& k, const std::string& v) {
  try {
    std::size_t n = 0;
    double d = std::stod(v, &n);
    if (n == v.size() && d > 0 && d < 1e7) return d;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(k + ": expected a positive number of seconds, got '" + v + "'");
}

std::int64_t to_int(const std::string& k, const std::string& v, std::int64_t lo) {
  try {
    std::size_t n = 0;
    long long d = std::stoll(v, &n);
    if (n == v.size() && d >= lo) return d;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(k + ": expected an integer >= " + std::to_string(lo) + ", got '" +
                              v + "'");
}

template <class E> E named(const std::string& k, const std::string& v) {
  try {
    return parse_name<E>(v);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(k + ": " + e.what());
  }
}

// A value in the grammar of coordinator/names.hpp, refused in its words after the key.
template <class F> auto with_key(const std::string& k, F parse, const std::string& v) {
  try {
    return parse(v);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(k + ": " + e.what());
  }
}

// A duration in the grammar of coordinator/names.hpp ("3600", "90s", "2w").
std::int64_t to_duration(const std::string& k, const std::string& v) { return with_key(k, parse_duration, v); }

// A queue's charge: service units per cpu-hour, 0 (free) or more.
double to_charge(const std::string& v) {
  try {
    std::size_t n = 0;
    double d = std::stod(v, &n);
    if (n == v.size() && d >= 0 && d <= 1e6) return d;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("queues: expected a charge of 0 to 1000000 service units per cpu-hour, got '" + v + "'");
}

std::vector<QueueDef> to_queues(const std::string& v) {
  std::vector<QueueDef> out;
  std::size_t pos = 0;
  while (pos <= v.size()) {
    std::size_t c = v.find(',', pos);
    std::string item = trim(v.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (!item.empty()) {
      QueueDef q;
      std::size_t colon = item.find(':');
      q.name = trim(item.substr(0, colon));
      if (colon != std::string::npos) {
        std::size_t second = item.find(':', colon + 1);
        q.priority = static_cast<int>(to_int("queues", trim(item.substr(colon + 1, second - colon - 1)), -1000000));
        if (second != std::string::npos) q.charge = to_charge(trim(item.substr(second + 1)));
      }
      if (q.name.empty()) throw std::invalid_argument("queues: empty queue name in '" + v + "'");
      out.push_back(q);
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  if (out.empty()) throw std::invalid_argument("queues: at least one queue is needed");
  return out;
}

// "host:port" with a port in 1..65535; throws naming `key`.
std::string to_host_port(const std::string& key, const std::string& v) {
  std::size_t colon = v.rfind(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < v.size() &&
            v.find_first_of(" \t/") == std::string::npos;
  if (ok) {
    std::string port = v.substr(colon + 1);
    ok = port.find_first_not_of("0123456789") == std::string::npos && port.size() <= 5 &&
         std::stoi(port) >= 1 && std::stoi(port) <= 65535;
  }
  if (!ok) throw std::invalid_argument(key + ": expected host:port (port 1-65535), got '" + v + "'");
  return v;
}

std::vector<std::string> to_voters(const std::string& v) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= v.size()) {
    std::size_t c = v.find(',', pos);
    std::string item = trim(v.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (!item.empty()) {
      if (std::find(out.begin(), out.end(), item) != out.end())
        throw std::invalid_argument("voters: '" + item + "' is listed twice");
      out.push_back(to_host_port("voters", item));
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  if (out.size() != 3 && out.size() != 5)
    throw std::invalid_argument("voters: expected 3 or 5 host:port addresses, got " + std::to_string(out.size()));
  return out;
}

}  // namespace

int parse_signal(const std::string& text) {
  std::string t;
  for (char ch : text) t += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (t.rfind("SIG", 0) == 0) t = t.substr(3);
  int sig = 0;
  if (!t.empty() && std::isdigit(static_cast<unsigned char>(t[0]))) {
    std::size_t n = 0;
    try {
      sig = std::stoi(t, &n);
    } catch (const std::exception&) {
      n = 0;
    }
    if (n != t.size() || sig <= 0 || sig >= NSIG)
      throw std::invalid_argument("'" + text + "' is not a signal number (1-" + std::to_string(NSIG - 1) + ")");
  } else if (t.rfind("RTMIN", 0) == 0 || t.rfind("RTMAX", 0) == 0) {
    // RTMIN, RTMIN+N, RTMAX, RTMAX-N as kill(1) spells them.
    bool min = t[3] == 'I';
    std::string off = t.substr(5);
    int k = 0;
    bool ok = off.empty();
    if (!ok && off.size() >= 2 && off[0] == (min ? '+' : '-') &&
        off.find_first_not_of("0123456789", 1) == std::string::npos && off.size() < 5) {
      k = std::stoi(off.substr(1));
      ok = true;
    }
    sig = min ? SIGRTMIN + k : SIGRTMAX - k;
    if (!ok || sig < SIGRTMIN || sig > SIGRTMAX)
      throw std::invalid_argument("'" + text + "' is not a real-time signal (RTMIN..RTMAX, e.g. RTMIN+2)");
  } else {
    for (int i = 1; i < SIGRTMIN && sig == 0; ++i)
      if (const char* a = sigabbrev_np(i); a && t == a) sig = i;
    if (sig == 0)
      throw std::invalid_argument("unknown signal '" + text + "' (a name such as USR1, USR2, TERM, or a number)");
  }
  if (sig == SIGKILL || sig == SIGSTOP)
    throw std::invalid_argument("signal " + signal_name(sig) + " cannot be caught: a job could never checkpoint on it");
  return sig;
}

std::string signal_name(int sig) {
  if (sig >= SIGRTMIN && sig <= SIGRTMAX)
    return sig == SIGRTMIN ? "RTMIN" : "RTMIN+" + std::to_string(sig - SIGRTMIN);
  if (const char* a = sig > 0 ? sigabbrev_np(sig) : nullptr) return a;
  return std::to_string(sig);
}

void set_config_key(Config& c, const std::string& key, const std::string& v) {
  if (key == "standalone") c.standalone = to_bool(key, v);
  else if (key == "state_dir") c.state_dir = v;
  else if (key == "socket") c.socket = v;
  else if (key == "pub") c.pub = v;
  else if (key == "log") c.log = v;
  else if (key == "cgroup_parent") c.cgroup_parent = v;
  else if (key == "cgroup") {
    if (v != "auto" && v != "v1" && v != "v2") throw std::invalid_argument("cgroup: expected auto, v1 or v2, got '" + v + "'");
    c.cgroup = v;
  } else if (key == "strict") c.strict = to_bool(key, v);
  else if (key == "node_state_dir") c.node_state_dir = v;
  else if (key == "jobfs_root") c.jobfs_root = v;
  else if (key == "ckpt_root") c.ckpt_root = v;
  else if (key == "topology_xml") c.topology_xml = v;
  else if (key == "declare_cores") c.declare_cores = static_cast<int>(to_int(key, v, 0));
  else if (key == "emulate") {
    if (!v.empty()) node::parse_emulate_spec(v);  // its own message names the bad part
    c.emulate = v;
  }
  else if (key == "policy") c.policy = named<Policy>(key, v);
  else if (key == "backfill") {
    c.policy = named<Policy>(key, v);
    c.warnings.push_back("'backfill' is deprecated: write 'policy = " + v + "' (the same names)");
  } else if (key == "order") {
    if (v.empty()) c.order.reset();  // the policy's
    else c.order = named<Order>(key, v);
  }
  else if (key == "max_reservation") c.max_reservation = static_cast<int>(std::min<std::int64_t>(to_int(key, v, 0), 1 << 20));
  else if (key == "default_duration") c.default_duration = to_duration(key, v);
  else if (key == "duration_offset") c.duration_offset = to_duration(key, v);
  else if (key == "split_factor") c.split_factor = with_key(key, parse_split_factor, v);
  else if (key == "split_threshold") c.split_threshold = to_duration(key, v);
  else if (key == "monitor_file") c.monitor_file = v;
  else if (key == "queues") c.queues = to_queues(v);
  else if (key == "cycle_interval") c.cycle_interval = to_seconds(key, v);
  else if (key == "heartbeat_interval") c.heartbeat_interval = to_seconds(key, v);
  else if (key == "usage_interval") c.usage_interval = to_seconds(key, v);
  else if (key == "poll_interval") c.poll_interval = to_seconds(key, v);
  else if (key == "default_walltime") c.default_walltime = to_duration(key, v);
  else if (key == "require_walltime") c.require_walltime = to_bool(key, v);
  else if (key == "keep_ended") c.keep_ended = to_int(key, v, 0);
  else if (key == "fsync") c.fsync = to_bool(key, v);
  else if (key == "operators") c.operators = v;
  else if (key == "client_timeout") c.client_timeout = to_seconds(key, v);
  else if (key == "mesh") c.mesh = v;
  else if (key == "voters") c.voters = to_voters(v);
  else if (key == "node_name") c.node_name = v;
  else if (key == "listen") c.listen = to_host_port(key, v);
  else if (key == "mesh_key") c.mesh_key = v;
  else if (key == "mesh_allowed_keys") c.mesh_allowed_keys = v;
  else if (key == "mesh_insecure") c.mesh_insecure = to_bool(key, v);
  else if (key == "mesh_submit_wait") {
    c.mesh_submit_wait = to_duration(key, v);
    if (c.mesh_submit_wait < 1) throw std::invalid_argument("mesh_submit_wait: at least 1 s, got '" + v + "'");
  }
  else if (key == "on_restart") {
    if (v != "adopt" && v != "cleanup")
      throw std::invalid_argument("on_restart: expected adopt or cleanup, got '" + v + "'");
    c.on_restart = v;
  } else if (key == "checkpoint_signal") {
    try {
      c.checkpoint_signal = parse_signal(v);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("checkpoint_signal: ") + e.what());
    }
  } else if (key == "checkpoint_grace") {
    const std::int64_t g = to_duration(key, v);  // checked before it is narrowed to int
    if (g > 7 * 86400)
      throw std::invalid_argument("checkpoint_grace: at most 604800 seconds (7 days), got '" + v + "'");
    c.checkpoint_grace = static_cast<int>(g);
  } else if (key == "pba") c.pba = to_bool(key, v);
  else if (key == "pba_plan") c.pba_plan = v;
  else if (key == "nci_plan") c.nci_plan = v;
  else if (key == "pba_preempt") c.pba_preempt = to_bool(key, v);
  else if (key == "pba_preempt_after") c.pba_preempt_after = to_duration(key, v);
  else if (key == "pba_max_requeues") c.pba_max_requeues = to_int(key, v, 0);
  else if (key == "pba_require_project") c.pba_require_project = to_bool(key, v);
  else if (key == "preempt_mode") c.preempt_mode = with_key(key, parse_preempt_mode, v);
  else if (key == "nci") c.nci = to_bool(key, v);
  else if (key == "nci_start_window") c.nci_start_window = to_duration(key, v);
  else if (key == "nci_require") {
    std::vector<std::string> req;
    std::size_t pos = 0;
    while (v != "none" && pos <= v.size()) {
      std::size_t e = v.find(',', pos);
      std::string item = trim(v.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
      if (item != "walltime" && item != "mem" && item != "jobfs")
        throw std::invalid_argument("nci_require: expected a list of walltime, mem, jobfs, or none; got '" + v + "'");
      req.push_back(item);
      if (e == std::string::npos) break;
      pos = e + 1;
    }
    c.nci_require = req;
  } else {
    throw std::invalid_argument("unknown key '" + key + "'");
  }
}

void parse_config_text(const std::string& text, const std::string& name, Config& cfg) {
  std::istringstream in(text);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    std::size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    std::size_t eq = line.find('=');
    if (eq == std::string::npos)
      throw std::runtime_error(name + ":" + std::to_string(no) + ": expected 'key = value'");
    const std::size_t warned = cfg.warnings.size();
    try {
      set_config_key(cfg, trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(name + ":" + std::to_string(no) + ": " + e.what());
    }
    for (std::size_t i = warned; i < cfg.warnings.size(); ++i)
      cfg.warnings[i] = name + ":" + std::to_string(no) + ": " + cfg.warnings[i];
  }
}

void load_config_file(const std::string& path, Config& cfg) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error(path + ": cannot read config file: it is a directory");
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot read config file: " + std::strerror(errno) +
                             " (without --config, corrald reads " + kDefaultConfigFile +
                             " if it exists; --no-config: built-in defaults)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path + ": cannot read config file: " + std::strerror(errno));
  parse_config_text(text.str(), path, cfg);
}

const char* const kUsage =
    "usage: corrald --standalone [options]\n"
    "       corrald --set mesh=NAME --set voters=H:P,H:P,H:P --set listen=H:P [options]\n"
    "       corrald --export-topology FILE [options]\n"
    "  --standalone            run this node as a whole Corral (local scheduling)\n"
    "                          (without it: a member of the mesh the config names, docs/mesh.md)\n"
    "  --config FILE           key = value settings (see corrald.conf.example); flags override.\n"
    "                          Without it /etc/corral/corrald.conf is read if it exists\n"
    "  --no-config             do not read /etc/corral/corrald.conf: built-in defaults and flags\n"
    "  --set KEY=VALUE         any config key (docs/configuration.md)\n"
    "  --state-dir DIR         journal of jobs (default /var/lib/corral)\n"
    "  --socket PATH           local command socket (default /run/corral/corrald.sock)\n"
    "  --pub ENDPOINT          ZeroMQ PUB endpoint for events, tcp:// or ipc://, or none\n"
    "                          (default tcp://127.0.0.1:7461)\n"
    "  --foreground            stay in the foreground (the default; for systemd)\n"
    "  --daemon                detach once serving (log to <state-dir>/corrald.log)\n"
    "  --log FILE              append the log here instead of stderr\n"
    "  --cgroup-parent NAME    cgroup parent group (default corral)\n"
    "  --node-state-dir DIR    launcher records (default /run/corral/node)\n"
    "  --jobfs-root DIR        job scratch directories (default /var/tmp/corral/jobfs)\n"
    "  --ckpt-root DIR         job checkpoint directories (default /var/tmp/corral/ckpt)\n"
    "  --topology-xml FILE     stand in a recorded hwloc XML topology for this machine's\n"
    "  --declare-cores N       stand in a declared node of N cores for this machine's\n"
    "  --emulate SPEC          emulate a node: cores=64,sockets=2,mem=256G,jobfs=1T; its jobs\n"
    "                          are timers (#CORRAL_EMULATE runtime=90s), no cgroups, no root\n"
    "                          (standalone unless a mesh is configured; docs/node.md)\n"
    "  --policy POLICY         fcfs, easy (default), conservative, reserve, checkpoint or corral\n"
    "  --backfill POLICY       the same (deprecated name)\n"
    "  --export-topology FILE  write the node's topology (discovered, or the stand-in above)\n"
    "                          as hwloc XML to FILE (- for stdout) and exit\n"
    "  --recover               start from a damaged journal: keep a copy of it, restore\n"
    "                          every intact entry, log each job it could not restore\n"
    "  -h, --help              this text\n";

namespace {

// Flags that set one config key each, as kUsage lists them.
struct KeyFlag {
  const char* flag;
  const char* key;
  const char* arg;
};
constexpr KeyFlag kKeyFlags[] = {
    {"--state-dir", "state_dir", "DIR"},         {"--socket", "socket", "PATH"},
    {"--pub", "pub", "ENDPOINT"},                {"--log", "log", "FILE"},
    {"--cgroup-parent", "cgroup_parent", "NAME"}, {"--node-state-dir", "node_state_dir", "DIR"},
    {"--jobfs-root", "jobfs_root", "DIR"},       {"--ckpt-root", "ckpt_root", "DIR"},
    {"--topology-xml", "topology_xml", "FILE"},  {"--declare-cores", "declare_cores", "N"},
    {"--policy", "policy", "POLICY"},            {"--backfill", "backfill", "POLICY"},
    {"--emulate", "emulate", "SPEC"},
};

// What the command line says, in its order: config keys (from the flags
// above and --set) are applied after the config file.
struct Parsed {
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<std::string> configs;
  bool no_config = false, standalone = false, help = false, recover = false;
  std::optional<bool> foreground;
  std::optional<std::string> export_topology;
};

void build_cli(CLI::App& app, Parsed& p) {
  app.set_help_flag();  // kUsage is the help text
  app.add_flag("-h,--help", p.help)->disable_flag_override();
  app.add_flag("--standalone", p.standalone)->disable_flag_override();
  app.add_flag("--recover", p.recover)->disable_flag_override();
  app.add_flag_callback("--foreground", [&p] { p.foreground = true; })->disable_flag_override();
  app.add_flag_callback("--daemon", [&p] { p.foreground = false; })->disable_flag_override();
  app.add_flag("--no-config", p.no_config)->disable_flag_override();
  app.add_option("--config", p.configs)->type_name("FILE");
  app.add_option_function<std::string>("--export-topology", [&p](const std::string& v) { p.export_topology = v; })
      ->type_name("FILE");
  app.add_option_function<std::string>("--set",
                                       [&p](const std::string& v) {
                                         const std::size_t eq = v.find('=');
                                         if (eq == std::string::npos) throw CLI::ValidationError("--set needs KEY=VALUE");
                                         p.keys.emplace_back(trim(v.substr(0, eq)), trim(v.substr(eq + 1)));
                                       })
      ->type_name("KEY=VALUE")
      ->trigger_on_parse();
  for (const KeyFlag& f : kKeyFlags)
    app.add_option_function<std::string>(f.flag, [&p, key = f.key](const std::string& v) { p.keys.emplace_back(key, v); })
        ->type_name(f.arg)
        ->trigger_on_parse();
}

// Reads --config FILE(s), or the default file when it exists (unless --no-config).
void load_configs(const Parsed& p, Config& cfg, const std::string& default_config) {
  for (const std::string& f : p.configs) {
    load_config_file(f, cfg);
    cfg.config_file = f;
  }
  const bool named = !p.configs.empty();
  if (named && p.no_config) throw std::invalid_argument("give either --config FILE or --no-config, not both");
  if (named || p.no_config || default_config.empty()) return;
  // A fresh install has no config file: the built-in defaults (every value in
  // corrald.conf.example) apply. Any other reason it cannot be read is an error.
  struct stat st{};
  if (::stat(default_config.c_str(), &st) == 0) {
    load_config_file(default_config, cfg);
    cfg.config_file = default_config;
  } else if (errno != ENOENT) {
    throw std::runtime_error(default_config + ": cannot read config file: " + std::strerror(errno));
  }
}

}  // namespace

std::vector<std::string> usage_flags() {
  Parsed p;
  CLI::App app("corrald");
  build_cli(app, p);
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    std::string names;
    for (const std::string& s : o->get_snames()) names += (names.empty() ? "-" : ", -") + s;
    for (const std::string& l : o->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
    out.push_back(o->get_type_size() == 0 ? names : names + " " + o->get_type_name());
  }
  return out;
}

bool parse_args(int argc, char** argv, Config& cfg, const std::string& default_config) {
  Parsed p;
  CLI::App app("corrald");
  build_cli(app, p);
  try {
    cli_parse(app, cli_args(argc, argv));
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(usage_error(e) + " (see corrald --help)");
  }
  if (p.help) {
    std::fputs(kUsage, stdout);
    return false;
  }
  load_configs(p, cfg, default_config);
  for (const auto& [key, val] : p.keys) set_config_key(cfg, key, val);
  if (p.standalone) cfg.standalone = true;
  if (p.recover) cfg.recover = true;
  if (p.foreground) cfg.foreground = *p.foreground;
  if (p.export_topology) {
    if (p.export_topology->empty()) throw std::invalid_argument("--export-topology needs a file (or - for stdout)");
    cfg.export_topology = *p.export_topology;
  }
  return true;
}

}  // namespace corral::agent
