// libFuzzer target for time-zone names (TimeZone::locate, fed by `tz:` in backfill.yml and
// --tz) and the small enum parsers next to it (grain, align, cover). Input: a name, then after
// the first NUL byte 8 bytes of an instant. Checks beyond "no crash, no sanitizer report":
//  - locate either returns a zone or throws a backfill::Error (never another exception);
//  - for a zone it knows: span_at(t) contains t, its offset is within +-26 h, and the day and
//    hour partitions of an instant within years 1..9999 contain it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backfill/calendar.hpp"
#include "backfill/error.hpp"
#include "backfill/periods.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

template <class F>
void parse_or_error(F&& f) {
  try {
    (void)f();
  } catch (const backfill::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const auto nul = all.find('\0');
  const std::string_view name = all.substr(0, nul);
  parse_or_error([&] { return backfill::parse_grain(name); });
  parse_or_error([&] { return backfill::parse_align(name); });
  parse_or_error([&] { return backfill::parse_cover(name); });

  backfill::TimeZone tz;
  try {
    tz = backfill::TimeZone::locate(name);
  } catch (const backfill::Error&) {
    return 0;
  }
  check(!tz.name().empty());
  std::uint64_t raw = 0;
  if (nul != std::string_view::npos) {
    std::memcpy(&raw, data + nul + 1, std::min<std::size_t>(8, size - nul - 1));
  }
  // Years 1..9999, the range the instant parser produces.
  constexpr backfill::Seconds lo = -62135596800;  // 0001-01-01T00:00:00Z
  constexpr backfill::Seconds hi = 253402300799;  // 9999-12-31T23:59:59Z
  const backfill::Seconds t =
      lo + static_cast<backfill::Seconds>(raw % static_cast<std::uint64_t>(hi - lo));
  const auto span = tz.span_at(t);
  check(span.begin <= t && t < span.end && span.offset > -26 * 3600 && span.offset < 26 * 3600);
  for (auto g : {backfill::Grain::hour, backfill::Grain::day}) {
    const auto p = backfill::partition_of(t, g, tz);
    check(p.contains(t));
  }
  return 0;
}
