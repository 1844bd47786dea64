// The name lists of coordinator/names.hpp: every name round-trips, an unknown
// one is refused naming the valid ones, the duration grammar, and what each
// policy name sets.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "coordinator/json_text.hpp"
#include <string>

#include "coordinator/names.hpp"
#include "coordinator/schedule.hpp"

using namespace corral;

namespace {
template <class E> void round_trips() {
  for (std::size_t i = 0; i < NameList<E>::names.size(); ++i) {
    const E e = static_cast<E>(i);
    INFO(name(e));
    CHECK(parse_name<E>(name(e)) == e);
    CHECK(find_name<E>(name(e)) == e);
  }
  CHECK_FALSE(find_name<E>("nonsense"));
  CHECK_FALSE(find_name<E>(""));
  // The error names every valid one.
  try {
    parse_name<E>("nonsense");
    FAIL("accepted 'nonsense'");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("unknown " + std::string(NameList<E>::what) + " 'nonsense'") != std::string::npos);
    for (std::string_view n : NameList<E>::names) CHECK(m.find(std::string(n)) != std::string::npos);
  }
}
}  // namespace

TEST_CASE("names: every name round-trips, unknown names are refused with the valid ones", "[names]") {
  round_trips<Policy>();
  round_trips<Backfill>();
  round_trips<Order>();
  round_trips<EndReason>();
  CHECK(name(EndReason::Memory) == "mem");  // the one spelling (never "memory")
  CHECK(name(EndReason::LaunchFailed) == "launch_failed");
  CHECK(name(Policy::Corral) == "corral");
  CHECK(names_of<Order>() == "fifo, sjf, saf, wfp3, lxf, sjbf, lxbf");
}

TEST_CASE("names: durations are seconds or take s, m, h, d, w", "[names]") {
  CHECK(parse_duration("3600") == 3600);
  CHECK(parse_duration("90s") == 90);
  CHECK(parse_duration("30m") == 1800);
  CHECK(parse_duration("12h") == 43200);
  CHECK(parse_duration("7d") == 604800);
  CHECK(parse_duration("2w") == 1209600);
  CHECK(parse_duration("0") == 0);
  for (const char* bad : {"", "h", "-5", "5x", "1.5h", "2ww", " 5", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(find_duration(bad));
    CHECK_THROWS_WITH(parse_duration(bad), Catch::Contains("expected a duration (3600, 90s, 30m, 12h, 7d or 2w)"));
  }
  CHECK(find_duration(std::to_string(kMaxDuration)) == kMaxDuration);
  CHECK_FALSE(find_duration(std::to_string(kMaxDuration / 7 / 86400 + 1) + "w"));
}

TEST_CASE("names: a textbook policy sets its planner policy alone; corral the best setting", "[names]") {
  const SchedConfig plain;
  for (Policy p : {Policy::Fcfs, Policy::Easy, Policy::Conservative, Policy::Reserve, Policy::Checkpoint}) {
    INFO(name(p));
    SchedConfig c;
    apply_policy(p, c);
    CHECK(name(c.planner.backfill) == name(p));
    CHECK(c.order.policy == Order::Fifo);
    CHECK(c.order.aging == 0);
    CHECK(c.order.aging_wide == plain.order.aging_wide);
    CHECK(c.order.aged_ahead == 0);
    CHECK(c.order.wide_fraction == plain.order.wide_fraction);
    CHECK(c.planner.checkpoint_split == plain.planner.checkpoint_split);
    CHECK_FALSE(c.preempt.enabled);
    CHECK(c.planner.reserve_depth == plain.planner.reserve_depth);
    CHECK(c.planner.reserve_wait == 0);
    CHECK_FALSE(policy_preset(p).predict);
    CHECK_FALSE(policy_preset(p).repredict);
    CHECK(policy_preset(p).predictor == Predictor::Mean2);
    CHECK_FALSE(policy_preset(p).predict_order_only);
  }
  SchedConfig c;
  apply_policy(Policy::Corral, c);
  CHECK(c.planner.backfill == Backfill::Checkpoint);
  CHECK(c.order.policy == Order::Lxf);
  CHECK(c.order.aging == 2 * 86400);
  CHECK(c.order.aging_wide == 0);
  CHECK(c.order.aged_ahead == 6);
  CHECK(c.order.wide_fraction == 0.1);
  CHECK(c.planner.checkpoint_split == 0.05);
  CHECK(c.planner.reserve_depth == 3);
  CHECK(c.planner.reserve_wait == 2 * 86400);
  CHECK_FALSE(c.preempt.enabled);
  CHECK(policy_preset(Policy::Corral).predict);
  CHECK(policy_preset(Policy::Corral).repredict);
  CHECK(policy_preset(Policy::Corral).predictor == Predictor::Similar);
  CHECK(policy_preset(Policy::Corral).predict_order_only);
}

TEST_CASE("JSON output escapes control characters (nlohmann)", "[names][json]") {
  // What every JSON writer of Corral uses: every control character escaped,
  // read back the same.
  std::string s;
  for (int c = 1; c < 0x20; ++c) s += static_cast<char>(c);
  s += "\"\\\x7f";
  const std::string text = json_text(nlohmann::ordered_json{{"k", s}});
  for (char c : text) CHECK(static_cast<unsigned char>(c) >= 0x20);
  CHECK(text.find("\\u0001") != std::string::npos);
  CHECK(text.find("\\n") != std::string::npos);
  CHECK(nlohmann::json::parse(text)["k"] == s);
}
