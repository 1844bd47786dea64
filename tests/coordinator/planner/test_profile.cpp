// Profile (utilization diagram) against a brute-force array over a small horizon.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "coordinator/planner/profile.hpp"

using namespace corral;

namespace {
constexpr Time kH = 400;  // horizon: beyond it every diagram is constant
struct Brute {
  std::vector<std::int64_t> f;
  Brute(std::int64_t cap) : f(kH + 1, cap) {}
  void add(Time a, Time b, std::int64_t d) {
    for (Time t = a; t < std::min<Time>(b, kH + 1); ++t) f[static_cast<std::size_t>(t)] += d;
  }
  std::int64_t at(Time t) const { return f[static_cast<std::size_t>(std::min(t, kH))]; }
  std::int64_t minf(Time a, Time b) const {
    std::int64_t m = at(a);
    for (Time t = a; t < b && t <= kH; ++t) m = std::min(m, at(t));
    return m;
  }
  Time earliest(std::int64_t need, Time dur, Time t0) const {
    for (Time t = t0; t <= kH; ++t)
      if (minf(t, t + dur) >= need) return t;
    return kForever;
  }
};
}  // namespace

TEST_CASE("profile matches brute force on random debits", "[planner][profile]") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    Profile p;
    p.reset(0, 64);
    Brute b(64);
    for (int op = 0; op < 600; ++op) {  // enough to split blocks
      const Time a = static_cast<Time>(rng() % 300);
      const bool forever = rng() % 10 == 0;
      const Time e = forever ? kForever : a + 1 + static_cast<Time>(rng() % 60);
      const std::int64_t d = static_cast<std::int64_t>(rng() % 5) - 2;
      // Keep free within [0, capacity] like real use (debit only where room).
      if (d < 0 && b.minf(a, std::min<Time>(e, kH + 1)) + d < 0) continue;
      if (d > 0) continue;
      p.add(a, e, d);
      b.add(a, e, d);
    }
    for (int q = 0; q < 200; ++q) {
      const Time t = static_cast<Time>(rng() % 350);
      const Time dur = 1 + static_cast<Time>(rng() % 80);
      const std::int64_t need = static_cast<std::int64_t>(rng() % 65);
      REQUIRE(p.free_at(t) == b.at(t));
      REQUIRE(p.min_free(t, t + dur) == b.minf(t, t + dur));
      const Time want = b.earliest(need, dur, t);
      const Time got = p.earliest(need, dur, t);
      REQUIRE(got == want);  // the diagram is constant past kH
    }
  }
}

TEST_CASE("profile build from release events and run_end", "[planner][profile]") {
  Profile p;
  // 10 cores, 2 free now; 3 released at 100, 5 at 200.
  p.build(0, 10, 2, {{100, 3}, {200, 5}});
  CHECK(p.free_at(0) == 2);
  CHECK(p.free_at(150) == 5);
  CHECK(p.free_at(1000) == 10);
  CHECK(p.run_end(0, 3) == 0);
  CHECK(p.run_end(0, 2) == kForever);
  CHECK(p.run_end_now(2) == kForever);
  CHECK(p.earliest(4, 50, 0) == 100);
  CHECK(p.earliest(6, 50, 0) == 200);
  CHECK(p.earliest(11, 1, 0) == kForever);
  p.add(100, 150, -5);  // a reservation
  CHECK(p.free_at(120) == 0);
  CHECK(p.earliest(4, 50, 0) == 150);
  CHECK(p.earliest(2, 100, 0) == 0);    // [0,100) holds exactly 2
  CHECK(p.earliest(2, 101, 0) == 150);  // but 100..150 has 0
  CHECK(p.min_free(50, 250) == 0);
  CHECK(p.next_change(0) == 100);
  CHECK(p.run_end_now(1) == 100);
}

// The conservative planner's pattern: earliest() then a debit at its answer
// (the profile reuses the location earliest() found), mixed with credits
// (checkpointed jobs give cores back) and debits from the origin.
TEST_CASE("profile earliest-then-reserve and credits match brute force", "[planner][profile]") {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 30; ++round) {
    const std::int64_t cap = 1 + static_cast<std::int64_t>(rng() % 40);
    Profile p;
    p.reset(0, cap);
    Brute b(cap);
    std::vector<std::pair<std::pair<Time, Time>, std::int64_t>> done;  // debits that may be credited back
    for (int op = 0; op < 500; ++op) {
      const int kind = static_cast<int>(rng() % 4);
      if (kind == 0 && !done.empty()) {  // credit a earlier debit back
        const std::size_t k = rng() % done.size();
        const auto [w, d] = done[k];
        p.add(w.first, w.second, -d);
        b.add(w.first, std::min<Time>(w.second, kH + 1), -d);
        done[k] = done.back();
        done.pop_back();
        continue;
      }
      const std::int64_t need = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(cap));
      const Time dur = 1 + static_cast<Time>(rng() % 70);
      const Time t0 = kind == 1 ? 0 : static_cast<Time>(rng() % 200);
      const Time t = p.earliest(need, dur, t0);
      REQUIRE(t == b.earliest(need, dur, t0));
      if (t >= kForever || t + dur > kH) continue;
      p.add(t, t + dur, -need);
      b.add(t, t + dur, -need);
      done.push_back({{t, t + dur}, -need});
      for (Time q = 0; q <= kH; q += 7) REQUIRE(p.free_at(q) == b.at(q));
    }
    for (int q = 0; q < 100; ++q) {
      const Time a = static_cast<Time>(rng() % 350);
      const Time dur = 1 + static_cast<Time>(rng() % 80);
      REQUIRE(p.min_free(a, a + dur) == b.minf(a, a + dur));
      const std::int64_t need = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(cap));
      Time want = kForever;  // first time >= a with free < need (constant past kH)
      for (Time x = a; x <= kH && want == kForever; ++x)
        if (b.at(x) < need) want = x;
      REQUIRE(p.run_end(a, need) == want);
    }
  }
}

// Many blocks and long windows (the paths that jump to a window's end and
// scan backwards, and skip whole blocks), against a brute-force array.
TEST_CASE("profile with thousands of points matches brute force", "[planner][profile]") {
  constexpr Time H = 6000;
  std::mt19937_64 rng(5);
  for (int round = 0; round < 3; ++round) {
    const std::int64_t cap = 8 + static_cast<std::int64_t>(rng() % 24);
    Profile p;
    p.reset(0, cap);
    std::vector<std::int64_t> f(H + 1, cap);
    // Every start from t0 on, each checked in constant time: `bad` is the first point from t on
    // with less than `need` free (one scan from the end), so the check is linear, not quadratic.
    auto brute_earliest = [&](std::int64_t need, Time dur, Time t0) {
      std::vector<Time> bad(H + 2, H + 1);
      for (Time t = H; t >= 0; --t)
        bad[static_cast<std::size_t>(t)] = f[static_cast<std::size_t>(t)] < need ? t : bad[static_cast<std::size_t>(t) + 1];
      for (Time t = t0; t <= H; ++t)
        if (bad[static_cast<std::size_t>(t)] > std::min(t + dur - 1, H)) return t;
      return kForever;
    };
    for (int op = 0; op < 2500; ++op) {
      const std::int64_t need = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(cap));
      const Time dur = 1 + static_cast<Time>(rng() % (rng() % 4 == 0 ? 1500 : 40));
      const Time t0 = static_cast<Time>(rng() % 3000);
      const Time t = p.earliest(need, dur, t0);
      REQUIRE(t == brute_earliest(need, dur, t0));
      if (t >= kForever || t + dur > H) continue;
      p.add(t, t + dur, -need);
      for (Time x = t; x < t + dur; ++x) f[static_cast<std::size_t>(x)] -= need;
    }
    REQUIRE(p.points() > 300);  // ten blocks or more
    for (Time x = 0; x <= H; x += 13) REQUIRE(p.free_at(x) == f[static_cast<std::size_t>(x)]);
  }
}
