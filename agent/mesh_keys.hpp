// The mesh's keys as corrald's configuration names them (docs/mesh.md,
// "Keys"): this node's secret key file (mesh_key) and the allowed keys
// (mesh_allowed_keys), which also give each voter's and each member's public
// key by its address. A mesh without keys is only an explicit choice (mesh_insecure).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coordinator/service/curve_keys.hpp"

namespace corral::agent {

struct MeshKeyFiles {
  std::string key;       // mesh_key: this node's secret key
  std::string allowed;   // mesh_allowed_keys
  bool insecure = false; // mesh_insecure: no CURVE at all
};

struct MeshKeys {
  bool curve = false;                              // false: mesh_insecure
  service::KeyPair own;
  std::map<std::string, std::string> allowed;      // public key -> address ("" none)
  std::map<std::string, std::string> peer_keys;    // host:port (each voter's, each member's) -> public key
};

// Reads and checks the files: both or neither set (neither only with
// mesh_insecure), every voter has a key in the allowed file, and this node's
// key is the one given for `listen` (a member that does not vote must have
// such a line: the coordinator reaches it there). Throws std::runtime_error naming the
// file (and the line).
MeshKeys load_mesh_keys(const MeshKeyFiles& f, const std::vector<std::string>& voters, const std::string& listen);

}  // namespace corral::agent
