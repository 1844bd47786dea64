#include "coordinator/service/curve_keys.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <zmq.h>

namespace corral::service {
namespace {

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Writes `text` to a new file at `path` with `mode` (O_EXCL unless `force`).
void write_new(const std::string& path, const std::string& text, mode_t mode, bool force) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), mode);
  if (fd < 0) throw std::runtime_error(sys_error("cannot write", path));
  bool ok = ::fchmod(fd, mode) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  std::string why = ok ? "" : sys_error("cannot write", path);
  if (::close(fd) != 0 && ok) why = sys_error("cannot write", path);
  if (!why.empty()) throw std::runtime_error(why);
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

// The lines of a key file that are not blank or comments, with their numbers.
std::vector<std::pair<int, std::string>> key_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(sys_error("cannot read", path));
  std::vector<std::pair<int, std::string>> out;
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    out.emplace_back(no, line);
  }
  if (in.bad()) throw std::runtime_error(sys_error("cannot read", path));
  return out;
}

std::string at(const std::string& path, int line) { return path + ":" + std::to_string(line) + ": "; }

}  // namespace

std::string check_z85_key(const std::string& key) {
  if (key.size() != kZ85KeyChars)
    return "expected a " + std::to_string(kZ85KeyChars) + "-character Z85 key (corral keygen), got " +
           std::to_string(key.size()) + " characters";
  std::uint8_t raw[32];
  if (!zmq_z85_decode(raw, key.c_str())) return "'" + key + "' is not Z85 text";
  return "";
}

KeyPair make_key_pair() {
  char pub[41], sec[41];
  do {
    if (zmq_curve_keypair(pub, sec) != 0)
      throw std::runtime_error(std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()) +
                               " (libzmq built without CURVE?)");
  } while (pub[0] == '#' || sec[0] == '#');
  return KeyPair{pub, sec};
}

std::string public_of(const std::string& secret_key) {
  if (std::string why = check_z85_key(secret_key); !why.empty()) throw std::runtime_error(why);
  char pub[41];
  if (zmq_curve_public(pub, secret_key.c_str()) != 0)
    throw std::runtime_error(std::string("cannot derive the public key: ") + zmq_strerror(zmq_errno()));
  return pub;
}

std::string secret_key_path(const std::string& dir) { return dir + "/mesh.key"; }
std::string public_key_path(const std::string& dir) { return dir + "/mesh.key.pub"; }

void write_key_pair(const std::string& dir, const KeyPair& kp, bool force) {
  const std::string sec = secret_key_path(dir), pub = public_key_path(dir);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw std::runtime_error(sys_error("cannot create", dir));
  if (!force)
    for (const std::string& p : {sec, pub})
      if (exists(p)) throw std::runtime_error(p + " exists: a node keeps its key (--force replaces it)");
  write_new(sec, "# corral mesh secret key: keep it on this node only (mode 0600)\n" + kp.secret_key + "\n", 0600, force);
  write_new(pub, kp.public_key + "\n", 0644, force);
}

KeyPair read_secret_key(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error(sys_error("cannot read", path));
  if (st.st_mode & 077)
    throw std::runtime_error(path + ": a secret key must not be readable by others (chmod 600 " + path + ")");
  auto lines = key_lines(path);
  if (lines.empty()) throw std::runtime_error(path + ": no key in the file (corral keygen writes one)");
  if (lines.size() > 1) throw std::runtime_error(at(path, lines[1].first) + "one secret key per file");
  const auto& [no, key] = lines[0];
  if (std::string why = check_z85_key(key); !why.empty()) throw std::runtime_error(at(path, no) + why);
  return KeyPair{public_of(key), key};
}

AllowedKeys read_allowed_keys(const std::string& path) {
  AllowedKeys out;
  for (const auto& [no, line] : key_lines(path)) {
    std::istringstream words(line);
    std::string key, address, rest;
    words >> key >> address >> rest;
    if (!address.empty() && address[0] == '#') address.clear(), rest.clear();
    if (std::string why = check_z85_key(key); !why.empty()) throw std::runtime_error(at(path, no) + why);
    if (!rest.empty() && rest[0] != '#')
      throw std::runtime_error(at(path, no) + "expected 'KEY [HOST:PORT] [# comment]', got '" + line + "'");
    if (out.keys.count(key)) throw std::runtime_error(at(path, no) + "key " + key + " is listed twice");
    if (!address.empty() && out.by_address.count(address))
      throw std::runtime_error(at(path, no) + address + " has two keys");
    out.keys[key] = address;
    if (!address.empty()) out.by_address[address] = key;
  }
  return out;
}

}  // namespace corral::service
