// One error vocabulary for the core: every failure is a backfill::Error with a kind, and every
// message names the bad value and what was expected.
//
//   throw backfill::InvalidInput(fmt::format("unknown grain '{}'; expected one of ...", s));
//   catch (const backfill::Error& e) { if (e.kind() == backfill::ErrorKind::not_found) ... }
#pragma once

#include <stdexcept>
#include <string>

namespace backfill {

enum class ErrorKind { invalid_input, cycle, not_found, conflict };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// A value the caller passed is malformed or out of range (maps to ValueError).
class InvalidInput : public Error {
 public:
  explicit InvalidInput(const std::string& message) : Error(ErrorKind::invalid_input, message) {}
};

// A dependency graph has a cycle; the message lists the path (maps to ValueError).
class CycleError : public Error {
 public:
  explicit CycleError(const std::string& message) : Error(ErrorKind::cycle, message) {}
};

// A name (model, column, time zone) does not exist (maps to KeyError).
class NotFound : public Error {
 public:
  explicit NotFound(const std::string& message) : Error(ErrorKind::not_found, message) {}
};

// The state changed under us: a lease lost, a stale audit (maps to RuntimeError).
class Conflict : public Error {
 public:
  explicit Conflict(const std::string& message) : Error(ErrorKind::conflict, message) {}
};

}  // namespace backfill
