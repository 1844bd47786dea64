// A damaged journal: a torn tail is cut off; damage anywhere else stops the store with an error
// naming the file, the offset and the jobs affected, and leaves the file as it is; recovery
// keeps a copy and restores every intact entry; ids are never handed out twice.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "agent/store.hpp"
#include "tests/temp_dir.hpp"

using corral::agent::JobRecord;
using corral::agent::Store;
namespace fs = std::filesystem;

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void write_all(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}
JobRecord job(std::uint64_t id) {
  JobRecord r;
  r.id = id;
  r.spec.name = "j" + std::to_string(id);
  r.spec.script = "#!/bin/sh\necho " + r.spec.name + "\n";
  r.user = "alice";
  return r;
}
// Byte offsets of each entry (4-byte big-endian length, 4-byte CRC, payload).
std::vector<std::size_t> entry_offsets(const std::string& data) {
  std::vector<std::size_t> out;
  for (std::size_t pos = 0; pos + 8 <= data.size();) {
    out.push_back(pos);
    auto* u = reinterpret_cast<const unsigned char*>(data.data() + pos);
    pos += 8 + ((std::size_t{u[0]} << 24) | (std::size_t{u[1]} << 16) | (std::size_t{u[2]} << 8) | u[3]);
  }
  return out;
}
// A journal of 19 entries after the compacted start: jobs 1..19 submitted one per flush.
std::string nineteen(const std::string& dir) {
  Store s(dir);
  for (int i = 0; i < 19; ++i) {
    s.put(job(s.next_id()));
    s.flush();
  }
  return s.path();
}
}  // namespace

TEST_CASE("journal damage: a flipped bit mid-file stops the store, names file, offset, jobs; file kept",
          "[agent]") {
  std::string d = temp_dir("journal");
  std::string path = nineteen(d + "/state");
  std::string before = read_all(path);
  auto offs = entry_offsets(before);
  REQUIRE(offs.size() == 20);  // the compacted start, then 19 puts
  std::size_t at = offs[9] + 20;  // inside entry 9 (job 9)
  before[at] = static_cast<char>(before[at] ^ 0x10);
  write_all(path, before);
  try {
    Store s(d + "/state");
    FAIL("a damaged journal was loaded");
  } catch (const std::exception& e) {
    std::string m = e.what();
    INFO(m);
    CHECK(m.find(path) != std::string::npos);
    CHECK(m.find("offset " + std::to_string(offs[9])) != std::string::npos);
    CHECK(m.find("10") != std::string::npos);
    CHECK(m.find("19") != std::string::npos);
    CHECK(m.find("--recover") != std::string::npos);
  }
  CHECK((read_all(path) == before));  // untouched
  CHECK(!fs::exists(path + ".new"));
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal damage: --recover keeps the original, restores every intact entry, ids go on",
          "[agent]") {
  std::string d = temp_dir("journal");
  std::string path = nineteen(d + "/state");
  std::string data = read_all(path);
  auto offs = entry_offsets(data);
  data[offs[9] + 20] = static_cast<char>(data[offs[9] + 20] ^ 0x10);
  write_all(path, data);
  {
    Store s(d + "/state", true, true);
    CHECK(s.jobs().size() == 18);  // all but job 9
    CHECK(s.find(9) == nullptr);
    CHECK(s.find(10) != nullptr);
    CHECK(s.find(19) != nullptr);
    const auto& lost = s.load_report().lost;
    CHECK(lost == std::vector<std::uint64_t>{9});
    CHECK(s.next_id() >= 20);
    // The original is kept beside it.
    bool kept = false;
    for (auto& e : fs::directory_iterator(d + "/state"))
      if (e.path().filename().string().rfind("journal.damaged-", 0) == 0)
        kept = read_all(e.path().string()) == data;
    CHECK(kept);
  }
  Store again(d + "/state");  // the restored journal loads cleanly
  CHECK(again.jobs().size() == 18);
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal damage: damaged first bytes or random bytes are damage, not an empty agent",
          "[agent]") {
  std::string d = temp_dir("journal");
  std::string path = nineteen(d + "/state");
  std::string data = read_all(path);
  std::string head = data;
  head[1] = static_cast<char>(head[1] ^ 0x40);
  write_all(path, head);
  CHECK_THROWS_WITH(Store(d + "/state"), Catch::Contains("damaged") && Catch::Contains("offset 0"));
  CHECK((read_all(path) == head));

  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write_all(path, noise);
  CHECK_THROWS_WITH(Store(d + "/state"), Catch::Contains("damaged"));
  CHECK((read_all(path) == noise));
  {
    // Recovery of pure noise restores nothing, but never reuses an id handed out before.
    Store s(d + "/state", true, true);
    CHECK(s.jobs().empty());
    CHECK(s.next_id() >= 20);
  }
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal damage: the next id survives losing the journal's tail entries", "[agent]") {
  std::string d = temp_dir("journal");
  std::string path = nineteen(d + "/state");
  std::string data = read_all(path);
  auto offs = entry_offsets(data);
  // The last five entries cut off (as if torn, or lost): their ids must not come back.
  write_all(path, data.substr(0, offs[15] + 3));
  Store s(d + "/state");
  CHECK(s.jobs().size() == 14);
  CHECK(s.next_id() >= 20);
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal: a 0-byte journal.new left by a crash is removed at start", "[agent]") {
  std::string d = temp_dir("journal");
  std::string path = nineteen(d + "/state");
  write_all(path + ".new", "");
  Store s(d + "/state");
  CHECK(s.jobs().size() == 19);
  CHECK(!fs::exists(path + ".new"));
  std::system(("rm -rf " + d).c_str());
}
