// Arrow in and out of the core, without libarrow: the C data and C stream interfaces
// (https://arrow.apache.org/docs/format/CDataInterface.html), zero-copy views over imported
// buffers, and a small owned-column builder that exports record-batch streams.
//
//   arrow::Table t;  t.add("id", arrow::int64_column({1, 2, 3}));
//   ArrowArrayStream s;  arrow::export_table(std::make_shared<const arrow::Table>(t), &s);
//
// Import: `import_stream(&stream)` moves the producer's stream into an `ImportedTable` whose
// batches keep the producer's release callbacks alive (RAII) for as long as any view is used.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

// ---- The C ABI, as the Arrow specification defines it (guards let other copies coexist). ----
extern "C" {
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};
#endif  // ARROW_C_DATA_INTERFACE

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};
#endif  // ARROW_C_STREAM_INTERFACE
}

namespace backfill::arrow {

// ---- Logical types ----

enum class TypeId : std::uint8_t {
  null,
  boolean,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  float32,
  float64,
  decimal128,
  utf8,
  large_utf8,
  utf8_view,
  binary,
  large_binary,
  binary_view,
  fixed_binary,
  date32,
  date64,
  time32,
  time64,
  timestamp,
  duration,
  list,
  large_list,
  struct_,
};
enum class TimeUnit : std::uint8_t { second, milli, micro, nano };

struct Field;

// A type as the C interface describes it. A dictionary-encoded column has `id` = its index type
// and `dictionary` = the value type; `logical()` is the type its values have.
struct DataType {
  TypeId id = TypeId::null;
  TimeUnit unit = TimeUnit::second;  // time32/64, timestamp, duration
  std::string tz;                    // timestamp: "" = naive (no zone)
  std::int32_t precision = 0;        // decimal128
  std::int32_t scale = 0;            // decimal128
  std::int32_t byte_width = 0;       // fixed_binary
  std::vector<Field> children;       // list (one), struct (many)
  std::shared_ptr<const DataType> dictionary;

  [[nodiscard]] const DataType& logical() const noexcept {
    return dictionary ? *dictionary : *this;
  }
  [[nodiscard]] bool is_dictionary() const noexcept { return dictionary != nullptr; }
};

struct Field {
  std::string name;
  DataType type;
  bool nullable = true;
};

[[nodiscard]] DataType make_type(TypeId id);
[[nodiscard]] DataType timestamp_type(TimeUnit unit, std::string tz = {});
[[nodiscard]] DataType list_type(DataType value);

// The C-interface format string ("l", "tsu:UTC", "+l", ...), and back. parse_format throws
// InvalidInput naming an unsupported format.
[[nodiscard]] std::string format_of(const DataType& type);
// Readable name: "int64", "timestamp[us, tz=UTC]", "dictionary<values=utf8, indices=int32>".
[[nodiscard]] std::string to_string(const DataType& type);
[[nodiscard]] bool operator==(const DataType& a, const DataType& b) noexcept;
[[nodiscard]] bool operator==(const Field& a, const Field& b) noexcept;

[[nodiscard]] bool is_signed_integer(TypeId id) noexcept;
[[nodiscard]] bool is_unsigned_integer(TypeId id) noexcept;
[[nodiscard]] bool is_integer(TypeId id) noexcept;
[[nodiscard]] bool is_floating(TypeId id) noexcept;
[[nodiscard]] bool is_string_like(TypeId id) noexcept;  // utf8*, binary*, fixed_binary
// Width in bytes of one value of a fixed-width primitive type; 0 for others (bool is bit-packed).
[[nodiscard]] int fixed_width(const DataType& type) noexcept;

// ---- Import: zero-copy views over a producer's buffers ----

// One array (a chunk of a column) as the producer laid it out. Valid only while the batch that
// owns it lives. `offset` is already applied to nothing: index i reads slot offset + i.
struct ArrayView {
  const DataType* type = nullptr;
  std::int64_t length = 0;
  std::int64_t offset = 0;
  std::int64_t null_count = 0;
  std::vector<const void*> buffers;  // buffers[0] is the validity bitmap (may be null)
  std::vector<ArrayView> children;
  std::shared_ptr<const ArrayView> dictionary;

  [[nodiscard]] bool is_valid(std::int64_t i) const noexcept {
    if (type->id == TypeId::null) return false;
    const auto* bits = static_cast<const std::uint8_t*>(buffers[0]);
    if (bits == nullptr) return true;
    const auto j = static_cast<std::uint64_t>(offset + i);
    return ((bits[j >> 3] >> (j & 7)) & 1) != 0;
  }
  template <class T>
  [[nodiscard]] const T* values(std::size_t buffer = 1) const noexcept {
    return static_cast<const T*>(buffers[buffer]) + offset;
  }
  // The bytes of value i of a utf8/binary-like array (all five layouts).
  [[nodiscard]] std::string_view bytes_at(std::int64_t i) const noexcept;
  // Value i of an integer-like array (every int width, date32/64, time32/64, timestamp,
  // duration) widened to int64; unsigned 64-bit values wrap.
  [[nodiscard]] std::int64_t int_at(std::int64_t i) const noexcept;
  // The two little-endian 64-bit words (low first) of value i of a decimal128 array.
  [[nodiscard]] const std::uint64_t* decimal_words(std::int64_t i) const noexcept {
    return static_cast<const std::uint64_t*>(buffers[1]) + 2 * (offset + i);
  }
  // Value i of a decimal128 array: the unscaled integer.
  [[nodiscard]] __int128 decimal_at(std::int64_t i) const noexcept {
    const std::uint64_t* w = decimal_words(i);
    return static_cast<__int128>((static_cast<unsigned __int128>(w[1]) << 64) | w[0]);
  }
  // Value i of a float16 array as a double.
  [[nodiscard]] double float16_at(std::int64_t i) const noexcept;
  [[nodiscard]] bool bool_at(std::int64_t i) const noexcept {
    const auto* bits = static_cast<const std::uint8_t*>(buffers[1]);
    const auto j = static_cast<std::uint64_t>(offset + i);
    return ((bits[j >> 3] >> (j & 7)) & 1) != 0;
  }
};

// One record batch: a struct array whose children are the columns.
class ImportedBatch {
 public:
  ImportedBatch(std::shared_ptr<ArrowArray> owner, ArrayView root)
      : owner_(std::move(owner)), root_(std::move(root)) {}
  [[nodiscard]] std::int64_t num_rows() const noexcept { return root_.length; }
  [[nodiscard]] const ArrayView& column(std::size_t i) const { return root_.children.at(i); }

 private:
  std::shared_ptr<ArrowArray> owner_;  // calls the producer's release when the last view goes
  ArrayView root_;
};

// Every batch of a stream (or one array), with its schema. Movable, not copyable: the views
// point into `schema_` and the batches' buffers.
class ImportedTable {
 public:
  ImportedTable() = default;
  ImportedTable(ImportedTable&&) noexcept = default;
  ImportedTable& operator=(ImportedTable&&) noexcept = default;
  ImportedTable(const ImportedTable&) = delete;
  ImportedTable& operator=(const ImportedTable&) = delete;

  [[nodiscard]] const std::vector<Field>& fields() const noexcept { return root_->children; }
  [[nodiscard]] const std::vector<ImportedBatch>& batches() const noexcept { return batches_; }
  [[nodiscard]] std::int64_t num_rows() const noexcept { return num_rows_; }
  // Column index by name; throws NotFound naming the column and the available ones.
  [[nodiscard]] std::size_t column_index(std::string_view name, std::string_view what) const;
  [[nodiscard]] std::optional<std::size_t> find_column(std::string_view name) const noexcept;
  // Total bytes of the buffers the views reference (validity, offsets, values), for budgets.
  [[nodiscard]] std::int64_t buffer_bytes() const noexcept;

 private:
  friend ImportedTable import_stream(ArrowArrayStream* src);
  friend ImportedTable import_array(ArrowSchema* schema, ArrowArray* array);
  // The struct type of a batch; views point into it, so it lives on the heap.
  std::shared_ptr<DataType> root_ = std::make_shared<DataType>(make_type(TypeId::struct_));
  std::vector<ImportedBatch> batches_;
  std::int64_t num_rows_ = 0;
};

// Moves `src` (its release is set to null, per the spec's move semantics), reads the schema and
// every batch, and releases the stream. A top-level type other than struct throws.
[[nodiscard]] ImportedTable import_stream(ArrowArrayStream* src);
// Moves a struct array (a record batch) and its schema; the schema is released at once.
[[nodiscard]] ImportedTable import_array(ArrowSchema* schema, ArrowArray* array);

// ---- Export: owned columns ----

// An owned array: the same layout as ArrayView (offset always 0), buffers held by shared_ptr so
// exported arrays keep them alive after the Table is gone.
struct Column {
  DataType type;
  std::int64_t length = 0;
  std::int64_t null_count = 0;
  std::vector<std::shared_ptr<const std::vector<std::uint8_t>>> buffers;  // [0] validity or null
  std::vector<Column> children;
  std::shared_ptr<const Column> dictionary;

  [[nodiscard]] bool is_valid(std::int64_t i) const noexcept;
  [[nodiscard]] ArrayView view() const;  // valid while this Column lives
};

// Validity: empty means every value is valid, else one entry per value (false = null).
using Validity = std::vector<bool>;
[[nodiscard]] Column int64_column(const std::vector<std::int64_t>& values,
                                  const Validity& valid = {});
[[nodiscard]] Column int32_column(const std::vector<std::int32_t>& values,
                                  const Validity& valid = {});
[[nodiscard]] Column uint64_column(const std::vector<std::uint64_t>& values,
                                   const Validity& valid = {});
[[nodiscard]] Column float64_column(const std::vector<double>& values, const Validity& valid = {});
// decimal128(precision, scale) of unscaled 128-bit values (two's complement, little-endian).
[[nodiscard]] Column decimal128_column(const std::vector<__int128>& values, std::int32_t precision,
                                       std::int32_t scale, const Validity& valid = {});
[[nodiscard]] Column bool_column(const std::vector<bool>& values, const Validity& valid = {});
[[nodiscard]] Column utf8_column(const std::vector<std::string>& values,
                                 const Validity& valid = {});
// Timestamps in `unit` since the epoch; `tz` is an IANA name ("UTC") or "" for naive values.
[[nodiscard]] Column timestamp_column(const std::vector<std::int64_t>& values, TimeUnit unit,
                                      std::string tz, const Validity& valid = {});
[[nodiscard]] Column date32_column(const std::vector<std::int32_t>& values,
                                   const Validity& valid = {});
[[nodiscard]] Column list_int64_column(const std::vector<std::vector<std::int64_t>>& values,
                                       const Validity& valid = {});
[[nodiscard]] Column null_column(std::int64_t length);

// Gathers rows into an owned column of the same logical type: dictionaries decoded, strings and
// binaries as large_utf8 / large_binary, lists as large_list. A row < 0 gives a null.
struct RowRef {
  std::int32_t chunk;  // index into the chunks (batches)
  std::int64_t row;    // row within that chunk
};
[[nodiscard]] Column take(const DataType& type, std::span<const ArrayView* const> chunks,
                          std::span<const RowRef> rows);
[[nodiscard]] Column take(const ArrayView& array, std::span<const std::int64_t> rows);
// Rows of one column of an imported table (chunk = batch index).
[[nodiscard]] Column take_column(const ImportedTable& table, std::size_t column,
                                 std::span<const RowRef> rows);

// A record batch of named, equal-length columns.
class Table {
 public:
  Table() = default;
  // Throws InvalidInput when the length differs from the table's or the name is taken.
  Table& add(std::string name, Column column);
  [[nodiscard]] std::int64_t num_rows() const noexcept { return num_rows_; }
  [[nodiscard]] std::size_t num_columns() const noexcept { return columns_.size(); }
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
  [[nodiscard]] const std::vector<Column>& columns() const noexcept { return columns_; }
  [[nodiscard]] const Column& column(std::string_view name) const;  // throws NotFound

 private:
  std::vector<std::string> names_;
  std::vector<Column> columns_;
  std::int64_t num_rows_ = 0;
};

// Fills `out` with a stream yielding the table as one record batch (none when it has no rows);
// the stream and every array it yields share ownership of the table.
void export_table(std::shared_ptr<const Table> table, ArrowArrayStream* out);
// Fills `out` with the table's schema (a struct of its columns).
void export_schema(const Table& table, ArrowSchema* out);

}  // namespace backfill::arrow
