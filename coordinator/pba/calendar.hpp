// ISO-8601 week arithmetic on Unix time, pure and UTC only (no time zones):
// the PBA allocation calendar is keyed by ISO week (pba-synopsys-patent.txt:
// "during a particular week a certain number of job slots ... up to twelve
// weeks in the future").
#pragma once

#include <optional>
#include <string>

#include "coordinator/model.hpp"

namespace corral::pba {

struct IsoWeek {
  int year = 1970;  // ISO week-numbering year (may differ from the calendar year)
  int week = 1;     // 1..52 or 53
  auto operator<=>(const IsoWeek&) const = default;
};

inline constexpr Time kDay = 86400;
inline constexpr Time kWeek = 7 * kDay;

// Days since 1970-01-01 for a proleptic Gregorian date, and back.
long long days_from_civil(int y, unsigned m, unsigned d);
void civil_from_days(long long z, int& y, unsigned& m, unsigned& d);

// ISO weekday of a Unix time: 1 = Monday .. 7 = Sunday.
int iso_weekday(Time t);
// The ISO week containing Unix time t (UTC).
IsoWeek iso_week(Time t);
// Unix time of Monday 00:00:00 UTC starting the given ISO week.
Time week_start(IsoWeek w);
// 52 or 53.
int weeks_in_iso_year(int year);
// A linear week number (Monday-based, 0 = the week of 1970-01-01), so that
// week_index(b) - week_index(a) counts whole weeks between two instants.
long long week_index(Time t);
long long week_index(IsoWeek w);
// The ISO week n weeks after (n < 0: before) w.
IsoWeek add_weeks(IsoWeek w, long long n);

// "2026-W48" (also "2026-w48", "2026W48"); nullopt with `error` set if bad.
std::optional<IsoWeek> parse_iso_week(const std::string& s, std::string* error = nullptr);
std::string format_iso_week(IsoWeek w);

}  // namespace corral::pba
