#include "export/arrow_batches.h"

#include <cstring>
#include <string>

namespace cutrace::exporting {

namespace {

// One column being filled: values (int64, double) or UTF-8 text with 32-bit offsets, and a validity bit
// per row.
struct Column {
  ColumnType type;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  std::vector<int32_t> offsets{0};
  std::string text;
  std::vector<uint8_t> validity;
  int64_t nulls = 0;

  void add(const Value& v, int64_t row) {
    if ((row & 7) == 0) validity.push_back(0);
    const bool present = v.kind != Value::Kind::kNull;
    if (present) validity.back() |= uint8_t(1u << (row & 7));
    else ++nulls;
    switch (type) {
      case ColumnType::kInt64: ints.push_back(v.kind == Value::Kind::kInt ? v.i : 0); break;
      case ColumnType::kDouble: reals.push_back(v.kind == Value::Kind::kReal ? v.d : 0); break;
      case ColumnType::kText:
        if (v.kind == Value::Kind::kText) text.append(v.t.data(), v.t.size());
        offsets.push_back(int32_t(text.size()));
        break;
    }
  }
};

// What an exported array owns: the builder's buffers, and the child structs.
struct ArrayHolder {
  std::vector<Column> columns;
  std::vector<ArrowArray> children;
  std::vector<ArrowArray*> child_pointers;
  std::vector<std::vector<const void*>> child_buffers;
  const void* parent_buffers[1] = {nullptr};
};

void release_child(ArrowArray* a) { a->release = nullptr; }

void release_array(ArrowArray* a) {
  delete static_cast<ArrayHolder*>(a->private_data);
  a->release = nullptr;
}

struct SchemaHolder {
  std::vector<ArrowSchema> children;
  std::vector<ArrowSchema*> child_pointers;
};

void release_child_schema(ArrowSchema* s) { s->release = nullptr; }

void release_schema(ArrowSchema* s) {
  delete static_cast<SchemaHolder*>(s->private_data);
  s->release = nullptr;
}

}  // namespace

struct ArrowBatchSink::Builder {
  explicit Builder(const TableDef& def) {
    for (const ColumnDef& c : def.columns) columns.push_back(Column{c.type, {}, {}, {0}, {}, {}, 0});
  }
  std::vector<Column> columns;
  int64_t rows = 0;
};

void export_arrow_schema(TableId table, ArrowSchema* out) {
  const TableDef& def = table_def(table);
  auto* holder = new SchemaHolder;
  holder->children.resize(def.columns.size());
  for (size_t i = 0; i < def.columns.size(); ++i) {
    const ColumnDef& c = def.columns[i];
    ArrowSchema& s = holder->children[i];
    s = ArrowSchema{};
    s.format = c.type == ColumnType::kInt64 ? "l" : c.type == ColumnType::kDouble ? "g" : "u";
    s.name = c.name;
    s.flags = c.not_null ? 0 : ARROW_FLAG_NULLABLE;
    s.release = release_child_schema;
    holder->child_pointers.push_back(&s);
  }
  *out = ArrowSchema{};
  out->format = "+s";
  out->name = def.name;
  out->n_children = int64_t(def.columns.size());
  out->children = holder->child_pointers.data();
  out->release = release_schema;
  out->private_data = holder;
}

ArrowBatchSink::ArrowBatchSink() {
  for (const TableDef& def : export_tables()) builders_.push_back(std::make_unique<Builder>(def));
}

ArrowBatchSink::~ArrowBatchSink() = default;

bool ArrowBatchSink::row(TableId table, const Value* values) {
  std::unique_ptr<Builder>& b = builders_[size_t(table)];
  for (size_t i = 0; i < b->columns.size(); ++i) b->columns[i].add(values[i], b->rows);
  if (++b->rows == kArrowBatchRows) {
    ready_.emplace_back(table, std::move(b));
    b = std::make_unique<Builder>(table_def(table));
  }
  return true;
}

void ArrowBatchSink::flush() {
  for (size_t t = 0; t < builders_.size(); ++t) {
    if (builders_[t]->rows == 0) continue;
    ready_.emplace_back(TableId(t), std::move(builders_[t]));
    builders_[t] = std::make_unique<Builder>(export_tables()[t]);
  }
}

TableId ArrowBatchSink::take(ArrowArray* out) {
  auto [table, builder] = std::move(ready_.front());
  ready_.pop_front();
  const int64_t rows = builder->rows;
  auto* holder = new ArrayHolder;
  holder->columns = std::move(builder->columns);
  const size_t n = holder->columns.size();
  holder->children.resize(n);
  holder->child_buffers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Column& c = holder->columns[i];
    std::vector<const void*>& buffers = holder->child_buffers[i];
    buffers.push_back(c.nulls ? c.validity.data() : nullptr);
    if (c.type == ColumnType::kInt64) buffers.push_back(c.ints.data());
    else if (c.type == ColumnType::kDouble) buffers.push_back(c.reals.data());
    else {
      buffers.push_back(c.offsets.data());
      buffers.push_back(c.text.data());
    }
    ArrowArray& a = holder->children[i];
    a = ArrowArray{};
    a.length = rows;
    a.null_count = c.nulls;
    a.n_buffers = int64_t(buffers.size());
    a.buffers = buffers.data();
    a.release = release_child;
    holder->child_pointers.push_back(&a);
  }
  *out = ArrowArray{};
  out->length = rows;
  out->n_buffers = 1;
  out->buffers = holder->parent_buffers;
  out->n_children = int64_t(n);
  out->children = holder->child_pointers.data();
  out->release = release_array;
  out->private_data = holder;
  return table;
}

}  // namespace cutrace::exporting
