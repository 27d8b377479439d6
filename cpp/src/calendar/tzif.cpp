#include "calendar/tzif.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <mutex>

namespace backfill::detail {
namespace {

std::mutex& dir_mutex() {
  static std::mutex m;
  return m;
}
std::string& configured_dir() {
  static std::string dir;
  return dir;
}

std::int64_t be(std::string_view s, std::size_t at, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  if (bytes == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
  return static_cast<std::int64_t>(v);
}

struct Counts {
  std::size_t isut, isstd, leap, time, type, chars;
};

std::optional<Counts> header(std::string_view d, std::size_t at) {
  if (d.size() < at + 44 || d.compare(at, 4, "TZif") != 0) return std::nullopt;
  auto n = [&](std::size_t i) { return static_cast<std::size_t>(be(d, at + 20 + 4 * i, 4)); };
  return Counts{n(0), n(1), n(2), n(3), n(4), n(5)};
}

std::size_t body_size(const Counts& c, std::size_t time_bytes) {
  return c.time * time_bytes + c.time + c.type * 6 + c.chars + c.leap * (time_bytes + 4) + c.isstd +
         c.isut;
}

// A zone name is a relative path of name characters, with no empty, "." or ".." component.
bool valid_name(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.back() == '/') return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    const auto end = std::min(name.find('/', start), name.size());
    const auto part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (const char c : part) {
      const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '+' || c == '.';
      if (!ok) return false;
    }
    start = end + 1;
  }
  return true;
}

}  // namespace

std::string tz_dir() {
  {
    const std::lock_guard lock(dir_mutex());
    if (!configured_dir().empty()) return configured_dir();
  }
  const char* env = std::getenv("TZDIR");
  return (env && *env) ? env : "/usr/share/zoneinfo";
}

void set_tz_dir(std::string dir) {
  const std::lock_guard lock(dir_mutex());
  configured_dir() = std::move(dir);
}

std::optional<TzifZone> parse_tzif(std::string_view d) {
  const auto first = header(d, 0);
  if (!first) return std::nullopt;
  const char version = d[4];
  std::size_t at = 44;
  Counts c = *first;
  std::size_t tb = 4;
  if (version >= '2') {  // skip the 32-bit block: the 64-bit one after it has the full range
    at += body_size(c, 4);
    const auto second = header(d, at);
    if (!second) return std::nullopt;
    c = *second;
    at += 44;
    tb = 8;
  }
  if (c.type == 0 || d.size() < at + body_size(c, tb)) return std::nullopt;
  const std::size_t times = at, indices = times + c.time * tb, types = indices + c.time;
  auto type_offset = [&](std::size_t i) {
    return static_cast<std::int32_t>(be(d, types + 6 * i, 4));
  };
  TzifZone z;
  z.initial_offset = type_offset(0);
  z.at.reserve(c.time);
  z.offset.reserve(c.time);
  for (std::size_t i = 0; i < c.time; ++i) {
    const auto type = static_cast<unsigned char>(d[indices + i]);
    if (type >= c.type) return std::nullopt;
    const auto t = be(d, times + i * tb, tb);
    if (!z.at.empty() && t <= z.at.back()) return std::nullopt;
    z.at.push_back(t);
    z.offset.push_back(type_offset(type));
  }
  const std::size_t end = at + body_size(c, tb);
  // The footer: "\n<POSIX TZ rule>\n" (version 2+).
  if (version >= '2' && d.size() > end + 1 && d[end] == '\n' && d.back() == '\n') {
    z.footer = parse_posix_rule(d.substr(end + 1, d.size() - end - 2));
  }
  return z;
}

std::optional<TzifZone> read_tzif(std::string_view name) {
  if (!valid_name(name)) return std::nullopt;
  std::string path = tz_dir();
  path += '/';
  path += name;
  // A directory ("America") opens as a stream but its first read throws (EISDIR): zones are
  // regular files only, and a read error is "no such zone", never an escaping ios failure.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    const std::string data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return parse_tzif(data);
  } catch (const std::ios_base::failure&) {
    return std::nullopt;
  }
}

}  // namespace backfill::detail
