#include "coordinator/sim/swf.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>
#include <stdexcept>

namespace corral::sim {

std::string read_file_maybe_gz(const std::string& path) {
  // gzopen reads uncompressed files transparently, so one path serves both.
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (!probe) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  std::fclose(probe);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
  gzbuffer(f, 1 << 17);
  std::string out;
  std::vector<char> buf(1 << 18);
  for (;;) {
    int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      throw std::runtime_error("cannot read '" + path + "': " + msg);
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<std::size_t>(n));
  }
  gzclose(f);
  return out;
}

namespace {

// Header "; MaxProcs: 338 (comment)" -> 338; returns 0 when absent/garbled.
int header_int(std::string_view line, std::string_view key) {
  auto pos = line.find(key);
  if (pos == std::string_view::npos) return 0;
  std::string rest(line.substr(pos + key.size()));
  const char* s = rest.c_str();
  while (*s == ' ' || *s == '\t' || *s == ':') ++s;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || v <= 0 || v > (1L << 30)) return 0;
  return static_cast<int>(v);
}

// Splits a data line into numbers. Fields may be floats (HPC2N). Returns an
// error text, empty on success.
std::string parse_fields(std::string_view line, std::vector<double>& f) {
  f.clear();
  std::size_t i = 0;
  std::string tok;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size()) break;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    tok.assign(line.substr(i, j - i));
    char* end = nullptr;
    double v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size() || !std::isfinite(v) || std::fabs(v) > 1e15)
      return "field " + std::to_string(f.size() + 1) + " is not a number: '" + tok + "'";
    f.push_back(v);
    i = j;
  }
  if (f.size() < 5) return "expected 18 fields, found " + std::to_string(f.size());
  return {};
}

std::int64_t as_int(const std::vector<double>& f, std::size_t field) {
  // field is 1-based as in the SWF definition; missing trailing fields are -1.
  if (field > f.size()) return -1;
  return static_cast<std::int64_t>(std::llround(f[field - 1]));
}

}  // namespace

SwfTrace parse_swf(const std::string& text, int machine_procs) {
  SwfTrace t;
  struct Raw {
    SwfJob j;
    std::int64_t procs = 0;
  };
  std::vector<Raw> raw;
  std::vector<double> f;
  std::size_t lineno = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    std::size_t k = line.find_first_not_of(" \t\r");
    if (k == std::string_view::npos) continue;  // blank
    line.remove_prefix(k);
    if (line[0] == ';') {
      if (int v = header_int(line, "MaxProcs"); v > 0 && t.max_procs == 0) t.max_procs = v;
      if (int v = header_int(line, "MaxNodes"); v > 0 && t.max_nodes == 0) t.max_nodes = v;
      if (auto k = line.find("UnixStartTime"); k != std::string_view::npos && t.unix_start == 0) {
        const std::string rest(line.substr(k + 13));
        const char* s = rest.c_str();
        while (*s == ' ' || *s == '\t' || *s == ':') ++s;
        char* end = nullptr;
        const long long v = std::strtoll(s, &end, 10);
        if (end != s && v > 0) t.unix_start = v;
      }
      continue;
    }
    ++t.lines;
    if (std::string why = parse_fields(line, f); !why.empty()) {
      if (t.bad_lines++ == 0) t.first_bad = "line " + std::to_string(lineno) + ": " + why;
      continue;
    }
    Raw r;
    std::int64_t id = as_int(f, 1);
    if (id < 0) {
      if (t.bad_lines++ == 0) t.first_bad = "line " + std::to_string(lineno) + ": negative job id";
      continue;
    }
    r.j.id = static_cast<JobId>(id);
    r.j.submit = as_int(f, 2);
    r.j.run = as_int(f, 4);
    std::int64_t req_procs = as_int(f, 8);
    r.procs = req_procs > 0 ? req_procs : as_int(f, 5);
    std::int64_t est = as_int(f, 9);
    r.j.estimate = est > 0 ? est : r.j.run;
    r.j.requested = est > 0;
    r.j.user = static_cast<long>(as_int(f, 12));
    r.j.group = static_cast<long>(as_int(f, 13));
    r.j.queue = static_cast<long>(as_int(f, 15));
    raw.push_back(r);
  }
  int machine = machine_procs > 0 ? machine_procs : (t.max_procs > 0 ? t.max_procs : t.max_nodes);
  t.jobs.reserve(raw.size());
  for (Raw& r : raw) {
    if (r.j.run <= 0 || r.procs <= 0 || (machine > 0 && r.procs > machine) || r.j.submit < 0) {
      ++t.skipped;
      continue;
    }
    r.j.procs = static_cast<int>(r.procs);
    if (r.j.run > r.j.estimate) r.j.run = r.j.estimate;  // killed at its limit
    t.jobs.push_back(r.j);
  }
  std::stable_sort(t.jobs.begin(), t.jobs.end(), [](const SwfJob& a, const SwfJob& b) {
    return a.submit != b.submit ? a.submit < b.submit : a.id < b.id;
  });
  return t;
}

}  // namespace corral::sim
