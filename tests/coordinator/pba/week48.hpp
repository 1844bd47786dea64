// The week the allocation tests are set in.
#pragma once

#include "coordinator/pba/calendar.hpp"

// Monday 2026-11-23 00:00 UTC, start of 2026-W48.
inline const corral::Time kW48 = corral::pba::week_start(corral::pba::IsoWeek{2026, 48});
