#include "coordinator/pba/calendar.hpp"

#include <cctype>
#include <cstdio>

namespace corral::pba {
namespace {
long long floor_div(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
}  // namespace

// Howard Hinnant's civil-calendar algorithms (public-domain formulas).
long long days_from_civil(int y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const long long era = floor_div(y, 400);
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

void civil_from_days(long long z, int& y, unsigned& m, unsigned& d) {
  z += 719468;
  const long long era = floor_div(z, 146097);
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int>(yoe + era * 400) + (m <= 2 ? 1 : 0);
}

int iso_weekday(Time t) {
  // 1970-01-01 was a Thursday (ISO weekday 4).
  const long long days = floor_div(t, kDay);
  return static_cast<int>(((days + 3) % 7 + 7) % 7) + 1;
}

long long week_index(Time t) {
  // Monday 1969-12-29 is day -3: shift so weeks start on Mondays.
  return floor_div(floor_div(t, kDay) + 3, 7);
}

IsoWeek iso_week(Time t) {
  const long long days = floor_div(t, kDay);
  // The ISO year is the calendar year of the week's Thursday.
  const long long thursday = days - (iso_weekday(t) - 1) + 3;
  int y;
  unsigned m, d;
  civil_from_days(thursday, y, m, d);
  const long long jan1 = days_from_civil(y, 1, 1);
  return IsoWeek{y, static_cast<int>((thursday - jan1) / 7) + 1};
}

Time week_start(IsoWeek w) {
  // Week 1 is the week containing January 4th.
  const long long jan4 = days_from_civil(w.year, 1, 4);
  const int wd = iso_weekday(jan4 * kDay);
  const long long monday = jan4 - (wd - 1) + 7LL * (w.week - 1);
  return monday * kDay;
}

int weeks_in_iso_year(int year) {
  // December 28th is always in the last ISO week of its year.
  return iso_week(days_from_civil(year, 12, 28) * kDay).week;
}

long long week_index(IsoWeek w) { return week_index(week_start(w)); }

IsoWeek add_weeks(IsoWeek w, long long n) { return iso_week(week_start(w) + n * kWeek); }

std::optional<IsoWeek> parse_iso_week(const std::string& s, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<IsoWeek> {
    if (error) *error = "bad ISO week '" + s + "': " + why + " (expected e.g. 2026-W48)";
    return std::nullopt;
  };
  std::size_t i = 0;
  int year = 0, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && digits < 4) {
    year = year * 10 + (s[i] - '0');
    ++i;
    ++digits;
  }
  if (digits != 4) return fail("year must have 4 digits");
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || (s[i] != 'W' && s[i] != 'w')) return fail("missing 'W'");
  ++i;
  int week = 0;
  digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && digits < 2) {
    week = week * 10 + (s[i] - '0');
    ++i;
    ++digits;
  }
  if (digits != 2 || i != s.size()) return fail("week must be two digits and end the text");
  if (week < 1 || week > weeks_in_iso_year(year))
    return fail("week " + std::to_string(week) + " does not exist in " + std::to_string(year) +
                " (it has " + std::to_string(weeks_in_iso_year(year)) + " weeks)");
  return IsoWeek{year, week};
}

std::string format_iso_week(IsoWeek w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-W%02d", w.year, w.week);
  return buf;
}

}  // namespace corral::pba
