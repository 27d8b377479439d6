// libFuzzer target for the ISO-8601 instant and date parser (parse_instant), the text every
// --start / --end / as_of passes through. The first byte picks the zone naive values are local
// to (UTC, a DST zone, a zone whose midnight is skipped, a half-hour-DST zone). Beyond "no crash,
// no sanitizer report", it checks:
//  - the parser either returns or throws backfill::InvalidInput (never another exception);
//  - nanos lie in [0, 1e9); a date-only value is the first instant of its local day;
//  - format_instant of the result parses back to the same second (in UTC);
//  - the partitions of every grain that contain the instant do contain it and have a label.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backfill/calendar.hpp"
#include "backfill/error.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

const backfill::TimeZone& zone(std::uint8_t pick) {
  static const backfill::TimeZone zones[] = {backfill::TimeZone{},
                                             backfill::TimeZone::locate("Europe/Berlin"),
                                             backfill::TimeZone::locate("America/Santiago"),
                                             backfill::TimeZone::locate("Australia/Lord_Howe"),
                                             backfill::TimeZone::locate("America/Sao_Paulo")};
  return zones[pick % 5];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const backfill::TimeZone tz = zone(data[0]);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  backfill::ParsedInstant p{};
  try {
    p = backfill::parse_instant(text, tz);
  } catch (const backfill::InvalidInput&) {
    return 0;
  }
  check(p.nanos >= 0 && p.nanos < 1'000'000'000);
  // An offset can carry 9999-12-31T23:59 into year 10000, or 0001-01-01 in a zone east of UTC
  // into year 0 (Berlin's LMT puts local midnight at 0000-12-31T23:06:32Z), and the parser takes
  // years 1..9999 only: the round trip is for instants in years 1..9999 UTC.
  constexpr backfill::Seconds first = -62135596800;  // 0001-01-01T00:00:00Z
  constexpr backfill::Seconds last = 253402300799;   // 9999-12-31T23:59:59Z
  if (p.seconds >= first && p.seconds <= last) {
    const auto again = backfill::parse_instant(backfill::format_instant(p.seconds));
    check(again.seconds == p.seconds && again.nanos == 0 && !again.date_only);
  }
  for (auto g : {backfill::Grain::hour, backfill::Grain::day, backfill::Grain::week,
                 backfill::Grain::month, backfill::Grain::quarter, backfill::Grain::year}) {
    const auto part = backfill::partition_of(p.seconds, g, tz);
    check(part.contains(p.seconds) && !part.label().empty());
    if (p.date_only && g == backfill::Grain::day) check(part.start() == p.seconds);
  }
  return 0;
}
