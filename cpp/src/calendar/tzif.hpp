// A reader of compiled time zone files (TZif, RFC 8536), so the zone data can come from any
// directory: the OS's /usr/share/zoneinfo, or the zoneinfo folder of the `tzdata` Python package
// on machines without one (the wheel ships no tz code with a compiled-in path; see README).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calendar/posix_tz.hpp"

namespace backfill::detail {

struct TzifZone {
  std::vector<std::int64_t> at;      // transition instants (UTC seconds), ascending
  std::vector<std::int32_t> offset;  // UTC offset in force from at[i] on
  std::int32_t initial_offset = 0;   // before the first transition (time type 0, RFC 8536 3.2)
  std::optional<PosixRule> footer;   // the rule after the last transition, when understood
};

// The directory zone names are looked up in: set_tz_dir's, else $TZDIR, else /usr/share/zoneinfo.
[[nodiscard]] std::string tz_dir();
void set_tz_dir(std::string dir);

// The zone `name` read from tz_dir(); nullopt when the name is not a zone there (also for names
// that would leave the directory, such as "../x" or "/etc/passwd").
[[nodiscard]] std::optional<TzifZone> read_tzif(std::string_view name);

// Parses TZif bytes (version 1 uses the 32-bit block; 2+ the 64-bit one and the footer).
[[nodiscard]] std::optional<TzifZone> parse_tzif(std::string_view data);

}  // namespace backfill::detail
