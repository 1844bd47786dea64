#include "agent/config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

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
      if (colon != std::string::npos)
        q.priority = static_cast<int>(to_int("queues", trim(item.substr(colon + 1)), -1000000));
      if (q.name.empty()) throw std::invalid_argument("queues: empty queue name in '" + v + "'");
      out.push_back(q);
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  if (out.empty()) throw std::invalid_argument("queues: at least one queue is needed");
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
  else if (key == "backfill") {
    if (v != "fcfs" && v != "easy" && v != "conservative" && v != "reserve" && v != "checkpoint")
      throw std::invalid_argument(
          "backfill: expected fcfs, easy, conservative, reserve or checkpoint, got '" + v + "'");
    c.backfill = v;
  } else if (key == "order") c.order = v;
  else if (key == "max_reservation") c.max_reservation = static_cast<int>(std::min<std::int64_t>(to_int(key, v, 0), 1 << 20));
  else if (key == "default_duration") c.default_duration = to_int(key, v, 0);
  else if (key == "monitor_file") c.monitor_file = v;
  else if (key == "queues") c.queues = to_queues(v);
  else if (key == "cycle_interval") c.cycle_interval = to_seconds(key, v);
  else if (key == "heartbeat_interval") c.heartbeat_interval = to_seconds(key, v);
  else if (key == "usage_interval") c.usage_interval = to_seconds(key, v);
  else if (key == "poll_interval") c.poll_interval = to_seconds(key, v);
  else if (key == "default_walltime") c.default_walltime = to_int(key, v, 0);
  else if (key == "require_walltime") c.require_walltime = to_bool(key, v);
  else if (key == "keep_ended") c.keep_ended = to_int(key, v, 0);
  else if (key == "fsync") c.fsync = to_bool(key, v);
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
    const std::int64_t g = to_int(key, v, 0);  // checked before it is narrowed to int
    if (g > 7 * 86400)
      throw std::invalid_argument("checkpoint_grace: at most 604800 seconds (7 days), got '" + v + "'");
    c.checkpoint_grace = static_cast<int>(g);
  } else if (key == "pba") c.pba = to_bool(key, v);
  else if (key == "pba_plan") c.pba_plan = v;
  else if (key == "pba_preempt") c.pba_preempt = to_bool(key, v);
  else if (key == "pba_preempt_after") c.pba_preempt_after = to_int(key, v, 0);
  else if (key == "pba_max_requeues") c.pba_max_requeues = to_int(key, v, 0);
  else if (key == "pba_require_project") c.pba_require_project = to_bool(key, v);
  else if (key == "preempt_mode") {
    if (v != "requeue" && v != "suspend")
      throw std::invalid_argument("preempt_mode: expected requeue or suspend, got '" + v + "'");
    c.preempt_mode = v;
  } else if (key == "nci") c.nci = to_bool(key, v);
  else if (key == "nci_start_window") c.nci_start_window = to_int(key, v, 0);
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

void load_config_file(const std::string& path, Config& cfg) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error(path + ": cannot read config file: it is a directory");
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot read config file: " + std::strerror(errno) +
                             " (without --config, corrald reads " + kDefaultConfigFile +
                             " if it exists; --no-config: built-in defaults)");
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
      throw std::runtime_error(path + ":" + std::to_string(no) + ": expected 'key = value'");
    try {
      set_config_key(cfg, trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(path + ":" + std::to_string(no) + ": " + e.what());
    }
  }
}

const char* const kUsage =
    "usage: corrald --standalone [options]\n"
    "       corrald --export-topology FILE [options]\n"
    "  --standalone            run this node as a whole Corral (local scheduling)\n"
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
    "  --backfill POLICY       fcfs, easy (default), conservative, reserve or checkpoint\n"
    "  --export-topology FILE  write the node's topology (discovered, or the stand-in above)\n"
    "                          as hwloc XML to FILE (- for stdout) and exit\n"
    "  -h, --help              this text\n";

// The parser's table: every flag it accepts (kUsage lists each one: tests/agent/test_store.cpp).
const FlagDef kFlags[] = {
    {"--standalone", nullptr, nullptr},         {"--foreground", nullptr, nullptr},
    {"--daemon", nullptr, nullptr},             {"--config", nullptr, "FILE"},
    {"--no-config", nullptr, nullptr},          {"--set", nullptr, "KEY=VALUE"},
    {"--export-topology", nullptr, "FILE"},     {"--help", nullptr, nullptr},
    {"-h", nullptr, nullptr},
    {"--state-dir", "state_dir", "DIR"},        {"--socket", "socket", "PATH"},
    {"--pub", "pub", "ENDPOINT"},               {"--log", "log", "FILE"},
    {"--cgroup-parent", "cgroup_parent", "NAME"}, {"--node-state-dir", "node_state_dir", "DIR"},
    {"--jobfs-root", "jobfs_root", "DIR"},      {"--ckpt-root", "ckpt_root", "DIR"},
    {"--topology-xml", "topology_xml", "FILE"}, {"--declare-cores", "declare_cores", "N"},
    {"--backfill", "backfill", "POLICY"},
};
const std::size_t kFlagCount = sizeof kFlags / sizeof kFlags[0];

bool parse_args(int argc, char** argv, Config& cfg, const std::string& default_config) {
  // Split "--flag=value"; every flag must be in kFlags.
  struct Arg {
    const FlagDef* def;
    std::string value;
  };
  std::vector<Arg> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], val;
    bool has_val = false;
    if (std::size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a.resize(eq);
      has_val = true;
    }
    const FlagDef* def = nullptr;
    for (std::size_t k = 0; k < kFlagCount && !def; ++k)
      if (a == kFlags[k].flag) def = &kFlags[k];
    if (!def) throw std::invalid_argument("unknown option '" + a + "' (see corrald --help)");
    if (def->arg && !has_val) {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs " + (a == "--config" ? "a file" : "a value"));
      val = argv[++i];
    } else if (!def->arg && has_val) {
      throw std::invalid_argument(a + " takes no value");
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return false;
    }
    args.push_back({def, val});
  }
  // The config file first, so flags override it wherever they appear.
  bool named = false, none = false;
  for (const auto& [def, val] : args) {
    if (std::string(def->flag) == "--config") {
      load_config_file(val, cfg);
      cfg.config_file = val;
      named = true;
    }
    none |= std::string(def->flag) == "--no-config";
  }
  if (named && none) throw std::invalid_argument("give either --config FILE or --no-config, not both");
  if (!named && !none && !default_config.empty()) {
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
  for (const auto& [def, val] : args) {
    std::string a = def->flag;
    if (def->key) set_config_key(cfg, def->key, val);
    else if (a == "--standalone") cfg.standalone = true;
    else if (a == "--foreground") cfg.foreground = true;
    else if (a == "--daemon") cfg.foreground = false;
    else if (a == "--export-topology") {
      if (val.empty()) throw std::invalid_argument("--export-topology needs a file (or - for stdout)");
      cfg.export_topology = val;
    } else if (a == "--set") {
      std::size_t eq = val.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--set needs KEY=VALUE");
      set_config_key(cfg, trim(val.substr(0, eq)), trim(val.substr(eq + 1)));
    }
  }
  return true;
}

}  // namespace corral::agent
