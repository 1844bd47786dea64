#include <catch2/catch.hpp>

#include "coordinator/pba/calendar.hpp"

using namespace corral;
using namespace corral::pba;

namespace {
Time at(int y, unsigned m, unsigned d, int hh = 0, int mm = 0, int ss = 0) {
  return days_from_civil(y, m, d) * kDay + hh * 3600 + mm * 60 + ss;
}
}  // namespace

TEST_CASE("iso_week: known dates and year boundaries", "[calendar]") {
  CHECK(iso_week(0) == IsoWeek{1970, 1});                       // Thursday 1970-01-01
  CHECK(iso_week(-1) == IsoWeek{1970, 1});                      // Wednesday 1969-12-31
  CHECK(iso_week(at(1969, 12, 28)) == IsoWeek{1969, 52});       // Sunday before
  CHECK(iso_week(at(2026, 1, 1)) == IsoWeek{2026, 1});          // Thursday
  CHECK(iso_week(at(2027, 1, 1)) == IsoWeek{2026, 53});         // Friday: last week of 2026
  CHECK(iso_week(at(2027, 1, 4)) == IsoWeek{2027, 1});          // Monday
  CHECK(iso_week(at(2024, 12, 30)) == IsoWeek{2025, 1});        // Monday in the next ISO year
  CHECK(iso_week(at(2021, 1, 3)) == IsoWeek{2020, 53});         // Sunday in the previous ISO year
  CHECK(iso_week(at(2026, 11, 22, 23, 59, 59)) == IsoWeek{2026, 47});  // Sunday, last second
  CHECK(iso_week(at(2026, 11, 23)) == IsoWeek{2026, 48});       // Monday 00:00:00
  CHECK(iso_weekday(at(2026, 11, 23)) == 1);
  CHECK(iso_weekday(at(2026, 11, 22)) == 7);
  CHECK(weeks_in_iso_year(2026) == 53);
  CHECK(weeks_in_iso_year(2025) == 52);
  CHECK(weeks_in_iso_year(2020) == 53);
  CHECK(week_start(IsoWeek{2026, 48}) == at(2026, 11, 23));
  CHECK(week_start(IsoWeek{2025, 1}) == at(2024, 12, 30));
}

TEST_CASE("iso_week: week_start round trip and boundaries 1960..2060", "[calendar]") {
  long long prev_index = week_index(week_start(IsoWeek{1960, 1})) - 1;
  for (int y = 1960; y <= 2060; ++y) {
    for (int w = 1; w <= weeks_in_iso_year(y); ++w) {
      const IsoWeek iw{y, w};
      const Time s = week_start(iw);
      REQUIRE(iso_week(s) == iw);
      REQUIRE(iso_weekday(s) == 1);
      REQUIRE(iso_week(s + kWeek - 1) == iw);          // Sunday 23:59:59
      REQUIRE(iso_week(s - 1) != iw);                  // previous Sunday
      REQUIRE(week_index(s) == prev_index + 1);        // weeks are consecutive
      prev_index = week_index(s);
      REQUIRE(add_weeks(iw, 1) == iso_week(s + kWeek));
    }
  }
  CHECK(add_weeks(IsoWeek{2026, 52}, 2) == IsoWeek{2027, 1});
  CHECK(add_weeks(IsoWeek{2027, 1}, -1) == IsoWeek{2026, 53});
}

TEST_CASE("parse_iso_week: valid and invalid", "[calendar]") {
  CHECK(parse_iso_week("2026-W48") == IsoWeek{2026, 48});
  CHECK(parse_iso_week("2026w05") == IsoWeek{2026, 5});
  CHECK(format_iso_week(IsoWeek{2026, 5}) == "2026-W05");
  std::string e;
  CHECK_FALSE(parse_iso_week("2025-W53", &e));
  CHECK(e.find("does not exist in 2025") != std::string::npos);
  CHECK(parse_iso_week("2026-W53"));
  CHECK_FALSE(parse_iso_week("2026-W00", &e));
  CHECK_FALSE(parse_iso_week("2026-48", &e));
  CHECK(e.find("missing 'W'") != std::string::npos);
  CHECK_FALSE(parse_iso_week("26-W48", &e));
  CHECK_FALSE(parse_iso_week("2026-W4", &e));
  CHECK_FALSE(parse_iso_week("2026-W48x", &e));
  CHECK_FALSE(parse_iso_week("", &e));
}
