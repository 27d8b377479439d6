// The export side of backfill/arrow.hpp: owned columns, take(), and C stream export.
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "backfill/arrow.hpp"
#include "backfill/error.hpp"

namespace backfill::arrow {
namespace {

using Bytes = std::vector<std::uint8_t>;
using BufferPtr = std::shared_ptr<const Bytes>;

void check_validity(const Validity& valid, std::size_t n, std::string_view what) {
  if (!valid.empty() && valid.size() != n) {
    throw InvalidInput(
        fmt::format("{} column: {} validity flags for {} values", what, valid.size(), n));
  }
}

// A bitmap from flags, or null when every value is valid; counts the nulls.
BufferPtr bitmap_of(const Validity& valid, std::int64_t& null_count) {
  null_count = 0;
  if (valid.empty()) return nullptr;
  auto bits = std::make_shared<Bytes>((valid.size() + 7) / 8, 0);
  for (std::size_t i = 0; i < valid.size(); ++i) {
    if (valid[i]) {
      (*bits)[i >> 3] = static_cast<std::uint8_t>((*bits)[i >> 3] | (1U << (i & 7)));
    } else {
      ++null_count;
    }
  }
  if (null_count == 0) return nullptr;
  return bits;
}

template <class T>
BufferPtr bytes_of(const std::vector<T>& values) {
  auto out = std::make_shared<Bytes>(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out->data(), values.data(), out->size());
  return out;
}

template <class T>
Column fixed_column(DataType type, const std::vector<T>& values, const Validity& valid) {
  check_validity(valid, values.size(), to_string(type));
  Column c;
  c.type = std::move(type);
  c.length = static_cast<std::int64_t>(values.size());
  c.buffers = {bitmap_of(valid, c.null_count), bytes_of(values)};
  return c;
}

void set_bit(Bytes& bits, std::size_t i) {
  bits[i >> 3] = static_cast<std::uint8_t>(bits[i >> 3] | (1U << (i & 7)));
}

}  // namespace

bool Column::is_valid(std::int64_t i) const noexcept {
  if (type.id == TypeId::null) return false;
  if (buffers.empty() || buffers[0] == nullptr) return true;
  const auto j = static_cast<std::size_t>(i);
  return (((*buffers[0])[j >> 3] >> (j & 7)) & 1) != 0;
}

ArrayView Column::view() const {
  ArrayView v;
  v.type = &type;
  v.length = length;
  v.null_count = null_count;
  for (const auto& b : buffers) v.buffers.push_back(b ? b->data() : nullptr);
  if (v.buffers.empty()) v.buffers.push_back(nullptr);
  for (const auto& c : children) v.children.push_back(c.view());
  if (dictionary) v.dictionary = std::make_shared<const ArrayView>(dictionary->view());
  return v;
}

Column int64_column(const std::vector<std::int64_t>& values, const Validity& valid) {
  return fixed_column(make_type(TypeId::int64), values, valid);
}
Column int32_column(const std::vector<std::int32_t>& values, const Validity& valid) {
  return fixed_column(make_type(TypeId::int32), values, valid);
}
Column uint64_column(const std::vector<std::uint64_t>& values, const Validity& valid) {
  return fixed_column(make_type(TypeId::uint64), values, valid);
}
Column float64_column(const std::vector<double>& values, const Validity& valid) {
  return fixed_column(make_type(TypeId::float64), values, valid);
}
Column decimal128_column(const std::vector<__int128>& values, std::int32_t precision,
                         std::int32_t scale, const Validity& valid) {
  // Arrow's decimal128 is the low 64-bit word first: the layout of __int128 on little-endian.
  static_assert(sizeof(__int128) == 16);
  DataType t = make_type(TypeId::decimal128);
  t.precision = precision;
  t.scale = scale;
  return fixed_column(std::move(t), values, valid);
}
Column date32_column(const std::vector<std::int32_t>& values, const Validity& valid) {
  return fixed_column(make_type(TypeId::date32), values, valid);
}
Column timestamp_column(const std::vector<std::int64_t>& values, TimeUnit unit, std::string tz,
                        const Validity& valid) {
  return fixed_column(timestamp_type(unit, std::move(tz)), values, valid);
}

Column bool_column(const std::vector<bool>& values, const Validity& valid) {
  check_validity(valid, values.size(), "bool");
  Column c;
  c.type = make_type(TypeId::boolean);
  c.length = static_cast<std::int64_t>(values.size());
  auto bits = std::make_shared<Bytes>((values.size() + 7) / 8, 0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i]) set_bit(*bits, i);
  }
  c.buffers = {bitmap_of(valid, c.null_count), std::move(bits)};
  return c;
}

Column utf8_column(const std::vector<std::string>& values, const Validity& valid) {
  check_validity(valid, values.size(), "utf8");
  Column c;
  c.type = make_type(TypeId::utf8);
  c.length = static_cast<std::int64_t>(values.size());
  auto offsets = std::make_shared<Bytes>((values.size() + 1) * 4);
  auto data = std::make_shared<Bytes>();
  std::int64_t pos = 0;
  auto* offs = reinterpret_cast<std::int32_t*>(offsets->data());
  offs[0] = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    pos += static_cast<std::int64_t>(values[i].size());
    if (pos > INT32_MAX) throw InvalidInput("utf8 column larger than 2 GiB");
    data->insert(data->end(), values[i].begin(), values[i].end());
    offs[i + 1] = static_cast<std::int32_t>(pos);
  }
  c.buffers = {bitmap_of(valid, c.null_count), std::move(offsets), std::move(data)};
  return c;
}

Column list_int64_column(const std::vector<std::vector<std::int64_t>>& values,
                         const Validity& valid) {
  check_validity(valid, values.size(), "list<int64>");
  std::vector<std::int64_t> flat;
  auto offsets = std::make_shared<Bytes>((values.size() + 1) * 4);
  auto* offs = reinterpret_cast<std::int32_t*>(offsets->data());
  offs[0] = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    flat.insert(flat.end(), values[i].begin(), values[i].end());
    offs[i + 1] = static_cast<std::int32_t>(flat.size());
  }
  Column c;
  c.type = list_type(make_type(TypeId::int64));
  c.length = static_cast<std::int64_t>(values.size());
  c.buffers = {bitmap_of(valid, c.null_count), std::move(offsets)};
  c.children.push_back(int64_column(flat));
  return c;
}

Column null_column(std::int64_t length) {
  Column c;
  c.type = make_type(TypeId::null);
  c.length = length;
  c.null_count = length;
  return c;
}

// ---- take ----

namespace {

using Chunks = std::span<const ArrayView* const>;

// Every chunk shares one logical type; `type` is it (dictionary chunks: their value type).
Column take_impl(const DataType& type, Chunks chunks, std::span<const RowRef> rows);

bool ref_valid(Chunks chunks, const RowRef& r) {
  return r.row >= 0 && chunks[static_cast<std::size_t>(r.chunk)]->is_valid(r.row);
}

BufferPtr take_validity(Chunks chunks, std::span<const RowRef> rows, std::int64_t& nulls) {
  nulls = 0;
  auto bits = std::make_shared<Bytes>((rows.size() + 7) / 8, 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (ref_valid(chunks, rows[i])) {
      set_bit(*bits, i);
    } else {
      ++nulls;
    }
  }
  return nulls == 0 ? nullptr : bits;
}

std::int64_t index_at(const ArrayView& a, std::int64_t r) {
  switch (a.type->id) {
    case TypeId::int8: return a.values<std::int8_t>()[r];
    case TypeId::uint8: return a.values<std::uint8_t>()[r];
    case TypeId::int16: return a.values<std::int16_t>()[r];
    case TypeId::uint16: return a.values<std::uint16_t>()[r];
    case TypeId::int32: return a.values<std::int32_t>()[r];
    case TypeId::uint32: return a.values<std::uint32_t>()[r];
    case TypeId::uint64: return static_cast<std::int64_t>(a.values<std::uint64_t>()[r]);
    default: return a.values<std::int64_t>()[r];
  }
}

// Decodes dictionary chunks: rows are redirected into each chunk's dictionary.
Column take_decoded(const DataType& type, Chunks chunks, std::span<const RowRef> rows) {
  std::vector<const ArrayView*> dicts;
  for (const auto* c : chunks) dicts.push_back(c->dictionary ? c->dictionary.get() : c);
  std::vector<RowRef> refs(rows.size(), RowRef{0, -1});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!ref_valid(chunks, rows[i])) continue;
    const auto* c = chunks[static_cast<std::size_t>(rows[i].chunk)];
    refs[i] = c->dictionary ? RowRef{rows[i].chunk, index_at(*c, rows[i].row)} : rows[i];
  }
  return take_impl(type, dicts, refs);
}

Column take_impl(const DataType& type, Chunks chunks, std::span<const RowRef> rows) {
  for (const auto* c : chunks) {
    if (c->dictionary) return take_decoded(type.logical(), chunks, rows);
  }
  const DataType& t = type.logical();
  const auto n = rows.size();
  if (t.id == TypeId::null) return null_column(static_cast<std::int64_t>(n));
  Column c;
  c.type = t;
  c.length = static_cast<std::int64_t>(n);
  BufferPtr validity = take_validity(chunks, rows, c.null_count);
  if (const int w = fixed_width(t); w > 0) {
    const auto width = static_cast<std::size_t>(w);
    auto out = std::make_shared<Bytes>(n * width, 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (rows[i].row < 0) continue;
      const auto* a = chunks[static_cast<std::size_t>(rows[i].chunk)];
      const auto* src = static_cast<const std::uint8_t*>(a->buffers[1]);
      std::memcpy(out->data() + i * width,
                  src + static_cast<std::size_t>(a->offset + rows[i].row) * width, width);
    }
    c.buffers = {validity, out};
    return c;
  }
  switch (t.id) {
    case TypeId::boolean: {
      auto bits = std::make_shared<Bytes>((n + 7) / 8, 0);
      for (std::size_t i = 0; i < n; ++i) {
        if (rows[i].row >= 0 &&
            chunks[static_cast<std::size_t>(rows[i].chunk)]->bool_at(rows[i].row)) {
          set_bit(*bits, i);
        }
      }
      c.buffers = {validity, bits};
      return c;
    }
    case TypeId::utf8:
    case TypeId::large_utf8:
    case TypeId::utf8_view:
    case TypeId::binary:
    case TypeId::large_binary:
    case TypeId::binary_view: {
      const bool text =
          t.id == TypeId::utf8 || t.id == TypeId::large_utf8 || t.id == TypeId::utf8_view;
      c.type = make_type(text ? TypeId::large_utf8 : TypeId::large_binary);
      auto offsets = std::make_shared<Bytes>((n + 1) * 8);
      auto data = std::make_shared<Bytes>();
      auto* offs = reinterpret_cast<std::int64_t*>(offsets->data());
      offs[0] = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (ref_valid(chunks, rows[i])) {
          auto s = chunks[static_cast<std::size_t>(rows[i].chunk)]->bytes_at(rows[i].row);
          data->insert(data->end(), s.begin(), s.end());
        }
        offs[i + 1] = static_cast<std::int64_t>(data->size());
      }
      c.buffers = {validity, offsets, data};
      return c;
    }
    case TypeId::list:
    case TypeId::large_list: {
      c.type.id = TypeId::large_list;
      std::vector<RowRef> child_rows;
      auto offsets = std::make_shared<Bytes>((n + 1) * 8);
      auto* offs = reinterpret_cast<std::int64_t*>(offsets->data());
      offs[0] = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (ref_valid(chunks, rows[i])) {
          const auto* a = chunks[static_cast<std::size_t>(rows[i].chunk)];
          const std::int64_t r = rows[i].row;
          const bool small = t.id == TypeId::list;
          const std::int64_t b =
              small ? a->values<std::int32_t>()[r] : a->values<std::int64_t>()[r];
          const std::int64_t e =
              small ? a->values<std::int32_t>()[r + 1] : a->values<std::int64_t>()[r + 1];
          for (auto k = b; k < e; ++k) child_rows.push_back(RowRef{rows[i].chunk, k});
        }
        offs[i + 1] = static_cast<std::int64_t>(child_rows.size());
      }
      std::vector<const ArrayView*> kids;
      for (const auto* a : chunks) kids.push_back(&a->children.at(0));
      c.buffers = {validity, offsets};
      c.children.push_back(take_impl(t.children.at(0).type, kids, child_rows));
      c.type.children[0].type = c.children[0].type;
      return c;
    }
    case TypeId::struct_: {
      c.buffers = {validity};
      for (std::size_t k = 0; k < t.children.size(); ++k) {
        std::vector<const ArrayView*> kids;
        for (const auto* a : chunks) kids.push_back(&a->children.at(k));
        c.children.push_back(take_impl(t.children[k].type, kids, rows));
        c.type.children[k].type = c.children.back().type;
      }
      return c;
    }
    default: throw InvalidInput(fmt::format("cannot gather values of Arrow type {}", to_string(t)));
  }
}

}  // namespace

Column take(const DataType& type, std::span<const ArrayView* const> chunks,
            std::span<const RowRef> rows) {
  return take_impl(type, chunks, rows);
}

Column take(const ArrayView& array, std::span<const std::int64_t> rows) {
  std::vector<RowRef> refs;
  refs.reserve(rows.size());
  for (auto r : rows) refs.push_back(RowRef{0, r});
  const ArrayView* chunk = &array;
  return take_impl(*array.type, std::span<const ArrayView* const>(&chunk, 1), refs);
}

Column take_column(const ImportedTable& table, std::size_t column, std::span<const RowRef> rows) {
  std::vector<const ArrayView*> chunks;
  for (const auto& b : table.batches()) chunks.push_back(&b.column(column));
  return take_impl(table.fields().at(column).type, chunks, rows);
}

// ---- Table ----

Table& Table::add(std::string name, Column column) {
  for (const auto& n : names_) {
    if (n == name) throw InvalidInput(fmt::format("table already has a column '{}'", name));
  }
  if (!columns_.empty() && column.length != num_rows_) {
    throw InvalidInput(
        fmt::format("column '{}' has {} rows; the table has {}", name, column.length, num_rows_));
  }
  num_rows_ = column.length;
  names_.push_back(std::move(name));
  columns_.push_back(std::move(column));
  return *this;
}

const Column& Table::column(std::string_view name) const {
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return columns_[i];
  }
  throw NotFound(fmt::format("table has no column '{}'", name));
}

// ---- Export through the C interfaces ----

namespace {

// Everything an exported ArrowSchema node points at.
struct SchemaData {
  std::string format;
  std::string name;
  std::vector<ArrowSchema> children;
  std::vector<ArrowSchema*> child_ptrs;
  std::unique_ptr<ArrowSchema> dictionary;
};

void release_schema(ArrowSchema* s) {
  if (s == nullptr || s->release == nullptr) return;
  auto* data = static_cast<SchemaData*>(s->private_data);
  for (auto& c : data->children) {
    if (c.release != nullptr) c.release(&c);
  }
  if (data->dictionary && data->dictionary->release != nullptr) {
    data->dictionary->release(data->dictionary.get());
  }
  delete data;  // NOLINT: owned through private_data by the C protocol
  s->release = nullptr;
}

void fill_schema(const DataType& type, std::string_view name, bool nullable, ArrowSchema* out) {
  auto data = std::make_unique<SchemaData>();
  data->format = format_of(type);
  data->name = std::string(name);
  data->children.resize(type.children.size());
  for (std::size_t i = 0; i < type.children.size(); ++i) {
    fill_schema(type.children[i].type, type.children[i].name, type.children[i].nullable,
                &data->children[i]);
    data->child_ptrs.push_back(&data->children[i]);
  }
  if (type.dictionary) {
    data->dictionary = std::make_unique<ArrowSchema>();
    fill_schema(*type.dictionary, "", true, data->dictionary.get());
  }
  out->format = data->format.c_str();
  out->name = data->name.c_str();
  out->metadata = nullptr;
  out->flags = nullable ? ARROW_FLAG_NULLABLE : 0;
  out->n_children = static_cast<std::int64_t>(data->children.size());
  out->children = data->child_ptrs.empty() ? nullptr : data->child_ptrs.data();
  out->dictionary = data->dictionary.get();
  out->release = &release_schema;
  out->private_data = data.release();
}

// Everything an exported ArrowArray node points at; `keep` holds the buffers alive.
struct ArrayData {
  std::shared_ptr<const Table> keep;
  std::vector<BufferPtr> buffers;
  std::vector<const void*> buffer_ptrs;
  std::vector<ArrowArray> children;
  std::vector<ArrowArray*> child_ptrs;
  std::unique_ptr<ArrowArray> dictionary;
};

void release_array(ArrowArray* a) {
  if (a == nullptr || a->release == nullptr) return;
  auto* data = static_cast<ArrayData*>(a->private_data);
  for (auto& c : data->children) {
    if (c.release != nullptr) c.release(&c);
  }
  if (data->dictionary && data->dictionary->release != nullptr) {
    data->dictionary->release(data->dictionary.get());
  }
  delete data;  // NOLINT: owned through private_data by the C protocol
  a->release = nullptr;
}

// Buffers are never null where the spec wants data: empty value buffers get a static byte.
const std::uint8_t kEmpty[8] = {};

void fill_array(const Column& col, const std::shared_ptr<const Table>& keep, ArrowArray* out) {
  auto data = std::make_unique<ArrayData>();
  data->keep = keep;
  data->buffers = col.buffers;
  for (std::size_t i = 0; i < col.buffers.size(); ++i) {
    const auto& b = col.buffers[i];
    data->buffer_ptrs.push_back(b ? (b->empty() ? kEmpty : b->data())
                                  : (i == 0 ? nullptr : kEmpty));
  }
  data->children.resize(col.children.size());
  for (std::size_t i = 0; i < col.children.size(); ++i) {
    fill_array(col.children[i], keep, &data->children[i]);
    data->child_ptrs.push_back(&data->children[i]);
  }
  if (col.dictionary) {
    data->dictionary = std::make_unique<ArrowArray>();
    fill_array(*col.dictionary, keep, data->dictionary.get());
  }
  out->length = col.length;
  out->null_count = col.null_count;
  out->offset = 0;
  out->n_buffers = static_cast<std::int64_t>(data->buffer_ptrs.size());
  out->n_children = static_cast<std::int64_t>(data->children.size());
  out->buffers = data->buffer_ptrs.empty() ? nullptr : data->buffer_ptrs.data();
  out->children = data->child_ptrs.empty() ? nullptr : data->child_ptrs.data();
  out->dictionary = data->dictionary.get();
  out->release = &release_array;
  out->private_data = data.release();
}

DataType struct_type_of(const Table& t) {
  DataType st = make_type(TypeId::struct_);
  for (std::size_t i = 0; i < t.num_columns(); ++i) {
    st.children.push_back(Field{t.names()[i], t.columns()[i].type, true});
  }
  return st;
}

struct StreamData {
  std::shared_ptr<const Table> table;
  bool done = false;
  std::string error;
};

int stream_get_schema(ArrowArrayStream* s, ArrowSchema* out) {
  auto* d = static_cast<StreamData*>(s->private_data);
  try {
    export_schema(*d->table, out);
    return 0;
  } catch (const std::exception& e) {
    d->error = e.what();
    return 12;  // ENOMEM: the only way this fails
  }
}

int stream_get_next(ArrowArrayStream* s, ArrowArray* out) {
  auto* d = static_cast<StreamData*>(s->private_data);
  if (d->done || d->table->num_rows() == 0) {
    std::memset(out, 0, sizeof(*out));  // release == nullptr marks the end
    return 0;
  }
  try {
    Column root;
    root.type = struct_type_of(*d->table);
    root.length = d->table->num_rows();
    root.buffers = {nullptr};
    root.children = d->table->columns();
    fill_array(root, d->table, out);
    d->done = true;
    return 0;
  } catch (const std::exception& e) {
    d->error = e.what();
    return 12;
  }
}

const char* stream_last_error(ArrowArrayStream* s) {
  auto* d = static_cast<StreamData*>(s->private_data);
  return d->error.empty() ? nullptr : d->error.c_str();
}

void stream_release(ArrowArrayStream* s) {
  if (s == nullptr || s->release == nullptr) return;
  delete static_cast<StreamData*>(s->private_data);  // NOLINT
  s->release = nullptr;
}

}  // namespace

void export_schema(const Table& table, ArrowSchema* out) {
  fill_schema(struct_type_of(table), "", false, out);
}

void export_table(std::shared_ptr<const Table> table, ArrowArrayStream* out) {
  auto data = std::make_unique<StreamData>();
  data->table = std::move(table);
  out->get_schema = &stream_get_schema;
  out->get_next = &stream_get_next;
  out->get_last_error = &stream_last_error;
  out->release = &stream_release;
  out->private_data = data.release();
}

}  // namespace backfill::arrow
