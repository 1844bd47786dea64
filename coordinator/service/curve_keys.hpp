// CURVE key pairs and the files that hold them (docs/mesh.md, "Keys"): a
// node's secret key file, its public key file, and the file of public keys
// allowed into the mesh (one Z85 key per line, like authorized_keys). Only
// libzmq: `corral keygen` and corrald both use it.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace corral::service {

inline constexpr std::size_t kZ85KeyChars = 40;  // a 32-byte CURVE key in Z85

struct KeyPair {
  std::string public_key, secret_key;  // Z85
};

// A fresh pair (zmq_curve_keypair). Its public key never starts with '#', so a
// line holding it is never taken for a comment. Throws std::runtime_error.
KeyPair make_key_pair();
// The public key of a Z85 secret key. Throws std::runtime_error.
std::string public_of(const std::string& secret_key);
// "" when `key` is a 40-character Z85 text of 32 bytes, else what is wrong.
std::string check_z85_key(const std::string& key);

// Writes DIR/mesh.key (the secret, mode 0600) and DIR/mesh.key.pub (mode
// 0644). Refuses, naming the file, when either exists and `force` is false.
// Throws std::runtime_error.
void write_key_pair(const std::string& dir, const KeyPair& kp, bool force);
std::string secret_key_path(const std::string& dir);
std::string public_key_path(const std::string& dir);

// A secret key file: one Z85 key on a line ('#' lines and blank lines
// ignored). It must not be readable by group or others. Throws
// std::runtime_error "FILE:LINE: why" (or "FILE: why").
KeyPair read_secret_key(const std::string& path);

// The allowed file: each line `KEY [ADDRESS] [# comment]`; ADDRESS (host:port)
// names the node (its listen address) that holds this key. Blank lines and lines starting with
// '#' are ignored. Throws std::runtime_error "FILE:LINE: why".
struct AllowedKeys {
  std::map<std::string, std::string> keys;         // Z85 key -> its address ("" none)
  std::map<std::string, std::string> by_address;   // host:port -> Z85 key
};
AllowedKeys read_allowed_keys(const std::string& path);

}  // namespace corral::service
