// Running `corral sim ...` from a test: the exit code, stdout and stderr;
// a scratch directory removed with its files; small readers of the output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef CORRAL_EXE
#error "CORRAL_EXE must name the built corral command"
#endif

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

// A scratch directory, removed with its files.
struct TempDir {
  std::string path;
  TempDir() {
    char d[] = "/tmp/corral-simcli-XXXXXX";
    REQUIRE(mkdtemp(d));
    path = d;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string operator/(const std::string& f) const { return path + "/" + f; }
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `corral sim ARGS`: exit code, stdout, stderr.
inline Run corral_sim(const std::string& args) {
  TempDir tmp;
  Run r;
  const std::string cmd = std::string(CORRAL_EXE) + " sim " + args + " 2>" + (tmp / "err");
  FILE* f = popen(cmd.c_str(), "r");
  REQUIRE(f);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(tmp / "err");
  return r;
}

// The JSON value of "key" as text: numbers at 6 significant digits, strings
// quoted; "(absent)" if there is no such key.
inline std::string value_of(const std::string& json, const std::string& key) {
  const auto js = nlohmann::json::parse(json);
  if (!js.contains(key)) return "(absent)";
  const auto& v = js[key];
  if (!v.is_number_float()) return v.dump();
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v.get<double>());
  return b;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

}  // namespace
