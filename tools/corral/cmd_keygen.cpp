// corral keygen: a node's CURVE key pair for the mesh (docs/mesh.md, "Keys").
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "coordinator/service/curve_keys.hpp"
#include "tools/cli_args.hpp"
#include "tools/cli_error.hpp"
#include "tools/corral/commands.hpp"

namespace corral::cli {
namespace {

const char* const kKeygenHelp =
    "usage: corral keygen [--out DIR] [--force]\n"
    "Writes this node's CURVE key pair for the mesh: DIR/mesh.key (secret, mode 0600;\n"
    "corrald's mesh_key) and DIR/mesh.key.pub, and prints the public key: add it,\n"
    "with the node's listen address if it votes, to every node's mesh_allowed_keys.\n"
    "  --out DIR   where to write (created if missing; default /etc/corral)\n"
    "  --force     replace an existing key pair (the old key stops working)\n";

}  // namespace

int cmd_keygen(int argc, char** argv) {
  std::string dir = "/etc/corral";
  bool force = false, help = false;
  try {
    CLI::App app("corral keygen");
    app.set_help_flag();
    app.add_flag("-h,--help", help)->disable_flag_override();
    app.add_option("--out", dir)->type_name("DIR");
    app.add_flag("--force", force)->disable_flag_override();
    cli_parse(app, cli_args(argc, argv));
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "corral keygen: %s\n", usage_error(e).c_str());
    return 2;
  }
  if (help) {
    std::fputs(kKeygenHelp, stdout);
    return 0;
  }
  try {
    service::KeyPair kp = service::make_key_pair();
    service::write_key_pair(dir, kp, force);
    std::printf("%s\n", kp.public_key.c_str());
    std::fprintf(stderr, "corral keygen: wrote %s (secret) and %s\n", service::secret_key_path(dir).c_str(),
                 service::public_key_path(dir).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral keygen: %s\n", e.what());
    return 1;
  }
}

}  // namespace corral::cli
