// corrald: the Corral node agent. See agent/daemon.hpp and docs/configuration.md.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "agent/config.hpp"
#include "agent/daemon.hpp"
#include "agent/mesh_keys.hpp"
#include "agent/mesh_link.hpp"
#include "agent/node/topology.hpp"

using corral::agent::Config;

int main(int argc, char** argv) {
  Config cfg;
  try {
    if (!corral::agent::parse_args(argc, argv, cfg)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corrald: %s\n", e.what());
    return 2;
  }
  for (const std::string& w : cfg.warnings) std::fprintf(stderr, "corrald: warning: %s\n", w.c_str());
  if (!cfg.export_topology.empty()) {
    // For admins: record this node (or check a stand-in) as hwloc XML; load it back with
    // topology_xml / --topology-xml.
    try {
      std::string xml = corral::node::export_xml(corral::agent::agent_topology(cfg, ""));
      if (cfg.export_topology == "-") {
        std::fwrite(xml.data(), 1, xml.size(), stdout);
        if (std::fflush(stdout) != 0) throw std::runtime_error(std::string("stdout: ") + std::strerror(errno));
        return 0;
      }
      std::string tmp = cfg.export_topology + ".tmp";
      std::FILE* f = std::fopen(tmp.c_str(), "w");
      if (!f) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
      bool ok = std::fwrite(xml.data(), 1, xml.size(), f) == xml.size();
      ok = (std::fclose(f) == 0) && ok;
      if (!ok || std::rename(tmp.c_str(), cfg.export_topology.c_str()) != 0) {
        std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot write " + cfg.export_topology + ": " + why);
      }
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "corrald: --export-topology: %s\n", e.what());
      return 1;
    }
  }
  if (!cfg.emulate.empty() && cfg.mesh.empty()) cfg.standalone = true;  // a test node: no mesh, no question
  if (cfg.standalone != cfg.mesh.empty()) {
    std::fprintf(stderr, cfg.standalone
                             ? "corrald: --standalone runs no mesh, but mesh = %s is configured; give one of them\n"
                             : "corrald: run 'corrald --standalone', or configure a mesh (mesh, voters, listen: "
                               "docs/mesh.md)%s\n",
                 cfg.mesh.c_str());
    return 2;
  }
  if (!cfg.mesh.empty()) {
    if (cfg.node_name.empty()) {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      cfg.node_name = host;
    }
    corral::agent::MeshConfig mc;
    mc.name = cfg.mesh;
    mc.voters = cfg.voters;
    mc.node_name = cfg.node_name;
    mc.listen = cfg.listen;
    if (std::string why = corral::agent::check_mesh_config(mc); !why.empty()) {
      std::fprintf(stderr, "corrald: %s\n", why.c_str());
      return 2;
    }
    try {
      corral::agent::load_mesh_keys({cfg.mesh_key, cfg.mesh_allowed_keys, cfg.mesh_insecure}, cfg.voters, cfg.listen);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "corrald: %s\n", e.what());
      return 2;
    }
  }
  // Detach with --daemon: the parent exits once the child serves (so
  // scripts can use the socket right after), or prints why it could not.
  int ready[2] = {-1, -1};
  if (!cfg.foreground) {
    if (cfg.log.empty()) cfg.log = cfg.state_dir + "/corrald.log";
    if (::pipe(ready) != 0) {
      std::perror("corrald: pipe");
      return 1;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("corrald: fork");
      return 1;
    }
    if (pid > 0) {
      ::close(ready[1]);
      char buf[1024];
      ssize_t n = ::read(ready[0], buf, sizeof buf - 1);
      if (n > 0 && buf[0] == 'o') return 0;
      if (n > 1) std::fprintf(stderr, "corrald: %.*s\n", static_cast<int>(n - 1), buf + 1);
      else std::fprintf(stderr, "corrald: failed to start (see %s)\n", cfg.log.c_str());
      return 1;
    }
    ::close(ready[0]);
    ::setsid();
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
    }
  }
  auto report = [&](char tag, const std::string& msg) {
    if (ready[1] < 0) return;
    std::string out = tag + msg;
    (void)!::write(ready[1], out.data(), out.size());
    ::close(ready[1]);
    ready[1] = -1;
  };
  try {
    ::mkdir(cfg.state_dir.c_str(), 0700);
    corral::agent::log_to(cfg.log);
    if (!cfg.foreground) {
      int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (null >= 0) ::dup2(null, 2);
    }
    corral::agent::Daemon d(cfg);
    report('o', "");
    return d.run();
  } catch (const std::exception& e) {
    corral::agent::log_line(std::string("fatal: ") + e.what());
    report('e', e.what());
    if (cfg.foreground && !cfg.log.empty()) std::fprintf(stderr, "corrald: %s\n", e.what());
    return 1;
  }
}
