#include "arrow/values.hpp"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "arrow/hashing.hpp"
#include "calendar/civil.hpp"

namespace backfill::detail {

using arrow::ArrayView;
using arrow::TimeUnit;
using arrow::TypeId;

Domain domain_of(const arrow::DataType& type) noexcept {
  const auto& t = type.logical();
  if (arrow::is_integer(t.id)) return Domain::integer;
  if (arrow::is_floating(t.id)) return Domain::floating;
  if (arrow::is_string_like(t.id)) return Domain::bytes;
  switch (t.id) {
    case TypeId::null: return Domain::null;
    case TypeId::boolean: return Domain::boolean;
    case TypeId::decimal128: return Domain::decimal;
    case TypeId::date32:
    case TypeId::date64: return Domain::date;
    case TypeId::time32:
    case TypeId::time64: return Domain::time;
    case TypeId::timestamp: return Domain::timestamp;
    case TypeId::duration: return Domain::duration;
    default: return Domain::nested;
  }
}

bool is_numeric(Domain d) noexcept {
  return d == Domain::integer || d == Domain::floating || d == Domain::decimal;
}

bool comparable(Domain a, Domain b) noexcept {
  if (a == b || a == Domain::null || b == Domain::null) return true;
  return is_numeric(a) && is_numeric(b);
}

namespace {

std::int64_t nanos_per(TimeUnit u) noexcept {
  switch (u) {
    case TimeUnit::second: return 1000000000;
    case TimeUnit::milli: return 1000000;
    case TimeUnit::micro: return 1000;
    case TimeUnit::nano: return 1;
  }
  return 1;
}

__int128 pow10(int n) noexcept {
  __int128 r = 1;
  for (int k = 0; k < n; ++k) r *= 10;
  return r;
}

std::string int128_text(__int128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  unsigned __int128 u =
      neg ? static_cast<unsigned __int128>(-(v + 1)) + 1 : static_cast<unsigned __int128>(v);
  std::string out;
  while (u != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) out.push_back('-');
  return {out.rbegin(), out.rend()};
}

}  // namespace

Value value_at(const ArrayView& a, std::int64_t i) {
  Value v;
  v.domain = domain_of(*a.type);
  if (!a.is_valid(i)) return v;
  if (a.dictionary) {
    const std::int64_t k = a.type->id == TypeId::uint64
                               ? static_cast<std::int64_t>(a.values<std::uint64_t>()[i])
                               : a.int_at(i);
    return value_at(*a.dictionary, k);
  }
  v.valid = true;
  const auto& t = *a.type;
  switch (v.domain) {
    case Domain::null: v.valid = false; break;
    case Domain::integer:
      v.i = t.id == TypeId::uint64 ? static_cast<__int128>(a.values<std::uint64_t>()[i])
                                   : static_cast<__int128>(a.int_at(i));
      break;
    case Domain::floating:
      v.f = t.id == TypeId::float64   ? a.values<double>()[i]
            : t.id == TypeId::float32 ? static_cast<double>(a.values<float>()[i])
                                      : a.float16_at(i);
      break;
    case Domain::decimal:
      v.i = a.decimal_at(i);
      v.scale = t.scale;
      break;
    case Domain::boolean: v.i = a.bool_at(i) ? 1 : 0; break;
    case Domain::bytes: v.s = a.bytes_at(i); break;
    case Domain::date:
      v.i = t.id == TypeId::date32 ? static_cast<__int128>(a.int_at(i)) * 86400 * 1000000000
                                   : static_cast<__int128>(a.int_at(i)) * 1000000;
      break;
    case Domain::time:
    case Domain::timestamp:
    case Domain::duration: v.i = static_cast<__int128>(a.int_at(i)) * nanos_per(t.unit); break;
    case Domain::nested: {
      std::uint64_t h = 0;
      hash_rows(a, i, i + 1, 0x6e65737465640000ULL, &h, false);
      v.h = h;
      break;
    }
  }
  return v;
}

std::optional<double> to_double(const Value& v) noexcept {
  if (!v.valid) return std::nullopt;
  switch (v.domain) {
    case Domain::integer: return static_cast<double>(v.i);
    case Domain::floating: return v.f;
    case Domain::decimal: return static_cast<double>(v.i) / std::pow(10.0, v.scale);
    default: return std::nullopt;
  }
}

bool values_equal(const Value& a, const Value& b) noexcept {
  if (!a.valid || !b.valid) return a.valid == b.valid;
  if (a.domain != b.domain) {
    if (a.domain == Domain::decimal && b.domain == Domain::integer) {
      return a.i == b.i * pow10(a.scale);
    }
    if (b.domain == Domain::decimal && a.domain == Domain::integer) {
      return b.i == a.i * pow10(b.scale);
    }
    auto x = to_double(a);
    auto y = to_double(b);
    if (!x || !y) return false;
    return *x == *y || (std::isnan(*x) && std::isnan(*y));
  }
  switch (a.domain) {
    case Domain::floating: return a.f == b.f || (std::isnan(a.f) && std::isnan(b.f));
    case Domain::decimal: {
      if (a.scale == b.scale) return a.i == b.i;
      return a.scale < b.scale ? a.i * pow10(b.scale - a.scale) == b.i
                               : a.i == b.i * pow10(a.scale - b.scale);
    }
    case Domain::bytes: return a.s == b.s;
    case Domain::nested: return a.h == b.h;
    case Domain::null: return true;
    default: return a.i == b.i;
  }
}

namespace {

std::string two(unsigned v) { return fmt::format("{:02}", v); }

std::string date_text(std::int64_t days) {
  const auto c = civil_from_days(days);
  return fmt::format("{:04}-{}-{}", c.year, two(c.month), two(c.day));
}

// "HH:MM:SS" plus a fraction when there is one, for nanoseconds into a day.
std::string clock_text(std::int64_t ns_of_day) {
  const std::int64_t s = ns_of_day / 1000000000;
  const std::int64_t frac = ns_of_day % 1000000000;
  std::string out = fmt::format("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  if (frac != 0) {
    std::string f = fmt::format("{:09}", frac);
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

}  // namespace

std::string render(const ArrayView& a, std::int64_t i) {
  if (!a.is_valid(i)) return "null";
  if (a.dictionary) {
    const std::int64_t k = a.type->id == TypeId::uint64
                               ? static_cast<std::int64_t>(a.values<std::uint64_t>()[i])
                               : a.int_at(i);
    return render(*a.dictionary, k);
  }
  const auto& t = *a.type;
  const Value v = value_at(a, i);
  switch (v.domain) {
    case Domain::null: return "null";
    case Domain::integer: return int128_text(v.i);
    case Domain::floating: {
      std::string out = fmt::format("{}", v.f);
      if (out.find_first_of(".eni") == std::string::npos) out += ".0";  // 3.0, not 3
      return out;
    }
    case Domain::boolean: return v.i ? "true" : "false";
    case Domain::decimal: {
      const std::string digits = int128_text(v.i < 0 ? -v.i : v.i);
      const auto sc = static_cast<std::size_t>(std::max(v.scale, 0));
      const std::string padded =
          digits.size() <= sc ? std::string(sc + 1 - digits.size(), '0') + digits : digits;
      const auto cut = padded.size() - sc;
      return fmt::format("{}{}{}{}", v.i < 0 ? "-" : "", padded.substr(0, cut), sc ? "." : "",
                         padded.substr(cut));
    }
    case Domain::bytes: {
      if (t.id == TypeId::utf8 || t.id == TypeId::large_utf8 || t.id == TypeId::utf8_view) {
        return std::string(v.s);
      }
      std::string out = "0x";
      for (char ch : v.s) out += fmt::format("{:02x}", static_cast<unsigned char>(ch));
      return out;
    }
    case Domain::date: {
      const auto days =
          static_cast<std::int64_t>(v.i / (static_cast<__int128>(86400) * 1000000000));
      return date_text(days -
                       (v.i < 0 && v.i % (static_cast<__int128>(86400) * 1000000000) != 0 ? 1 : 0));
    }
    case Domain::time: return clock_text(static_cast<std::int64_t>(v.i));
    case Domain::timestamp: {
      const __int128 day_ns = static_cast<__int128>(86400) * 1000000000;
      __int128 days = v.i / day_ns;
      __int128 rem = v.i % day_ns;
      if (rem < 0) {
        rem += day_ns;
        days -= 1;
      }
      std::string out = date_text(static_cast<std::int64_t>(days)) + "T" +
                        clock_text(static_cast<std::int64_t>(rem));
      if (!t.tz.empty()) out += t.tz == "UTC" ? "Z" : "[" + t.tz + "]";
      return out;
    }
    case Domain::duration: {
      static constexpr std::string_view units[] = {"s", "ms", "us", "ns"};
      return fmt::format("{}{}", a.int_at(i), units[static_cast<int>(t.unit)]);
    }
    case Domain::nested: {
      std::string out;
      if (t.id == TypeId::struct_) {
        out = "{";
        for (std::size_t c = 0; c < a.children.size(); ++c) {
          out +=
              fmt::format("{}{}: {}", c ? ", " : "", t.children[c].name, render(a.children[c], i));
        }
        return out + "}";
      }
      const bool small = t.id == TypeId::list;
      const std::int64_t b = small ? a.values<std::int32_t>()[i] : a.values<std::int64_t>()[i];
      const std::int64_t e =
          small ? a.values<std::int32_t>()[i + 1] : a.values<std::int64_t>()[i + 1];
      out = "[";
      for (auto k = b; k < e; ++k) out += (k > b ? ", " : "") + render(a.children.at(0), k);
      return out + "]";
    }
  }
  return "?";
}

// Seconds of a date/timestamp cell, as an instant (naive timestamps and dates are local to tz).
std::optional<Seconds> instant_of(const ArrayView& a, std::int64_t i, TimeZone tz) {
  if (!a.is_valid(i)) return std::nullopt;
  // Fast paths (one per row of a partitioned diff or fingerprint): UTC timestamps and dates.
  if (a.dictionary == nullptr && (tz.is_utc() || !a.type->tz.empty())) {
    if (a.type->id == TypeId::timestamp) {
      const std::int64_t per = 1000000000 / nanos_per(a.type->unit);
      const std::int64_t v = a.values<std::int64_t>()[i];
      return v / per - ((v % per != 0 && v < 0) ? 1 : 0);
    }
    if (a.type->id == TypeId::date32 && tz.is_utc()) {
      return static_cast<Seconds>(a.values<std::int32_t>()[i]) * 86400;
    }
  }
  const Value v = value_at(a, i);
  const __int128 ns = v.i;
  const __int128 per = 1000000000;
  auto floor_sec = [&] {
    __int128 q = ns / per;
    if (ns % per != 0 && ns < 0) q -= 1;
    return static_cast<Seconds>(q);
  };
  if (v.domain == Domain::date) {
    return tz.first_instant_of(static_cast<std::int64_t>(floor_sec() / 86400));
  }
  const Seconds t = floor_sec();
  if (!a.type->logical().tz.empty() || tz.is_utc()) return t;
  // A naive timestamp is a wall-clock time in tz: take the offset in force around it.
  return t - tz.offset_at(t - tz.offset_at(t));
}

const Partition* PartitionCache::of(const ArrayView& a, std::int64_t i) {
  if (!a.is_valid(i)) return nullptr;
  const TypeId id = a.type->id;
  if (a.dictionary == nullptr && (id == TypeId::date32 || id == TypeId::date64)) {
    const std::int64_t day = id == TypeId::date32
                                 ? a.values<std::int32_t>()[i]
                                 : floor_div(a.values<std::int64_t>()[i], 86400000);
    auto it = by_day_.find(day);
    if (it == by_day_.end()) {
      it = by_day_.emplace(day, partition_of(tz_.first_instant_of(day), grain_, tz_)).first;
    }
    return &it->second;
  }
  const auto t = instant_of(a, i, tz_);
  if (!t) return nullptr;
  if (last_ != nullptr && last_->contains(*t)) return last_;
  const std::int64_t hour = floor_div(*t, 3600);
  auto it = by_hour_.find(hour);
  if (it == by_hour_.end()) {
    it = by_hour_.emplace(hour, partition_of(*t, grain_, tz_)).first;
  } else if (!it->second.contains(*t)) {
    it->second = partition_of(*t, grain_, tz_);  // an hour split by a partition boundary
  }
  last_ = &it->second;
  return last_;
}

}  // namespace backfill::detail
