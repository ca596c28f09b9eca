#include "export/sqlite_export.h"

#include <sqlite3.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "reader/decode.h"
#include "export/export_tables.h"

namespace cutrace::exporting {
namespace {

using model::ExportOptions;

// "CREATE TABLE name (column TYPE [NOT NULL], ..., [PRIMARY KEY (...)]);" for every table kept.
std::string schema_sql(const std::vector<bool>& kept) {
  std::string sql;
  for (const TableDef& t : export_tables()) {
    if (!kept[size_t(t.id)]) continue;
    sql += "CREATE TABLE " + std::string(t.name) + " (";
    for (size_t i = 0; i < t.columns.size(); ++i) {
      const ColumnDef& c = t.columns[i];
      sql += (i ? ", " : "") + std::string(c.name) +
             (c.type == ColumnType::kInt64 ? " INTEGER" : c.type == ColumnType::kDouble ? " REAL" : " TEXT") +
             (c.not_null ? " NOT NULL" : "");
    }
    if (t.primary_key) sql += std::string(", PRIMARY KEY (") + t.primary_key + ")";
    sql += ");\n";
  }
  return sql;
}

// Rows go in kBatchRows at a time, through one prepared INSERT of that many rows: a statement's
// execution costs about as much as the values it binds, so one per row doubled the export's time.
constexpr size_t kBatchRows = 64;

class SqliteSink : public RowSink {
 public:
  SqliteSink(sqlite3* db, const std::vector<bool>& kept) {
    for (const TableDef& t : export_tables()) {
      Table& table = tables_.emplace_back();
      if (!kept[size_t(t.id)]) continue;  // no statements: the table is left out
      table.columns = t.columns.size();
      std::string row = "(";
      for (size_t i = 0; i < t.columns.size(); ++i) row += i ? ",?" : "?";
      row += ")";
      std::string one = "INSERT INTO " + std::string(t.name) + " VALUES " + row, many = one;
      for (size_t r = 1; r < kBatchRows; ++r) many += "," + row;
      for (auto [sql, stmt] : {std::pair{&one, &table.one}, std::pair{&many, &table.many}})
        if (sqlite3_prepare_v3(db, sql->c_str(), -1, SQLITE_PREPARE_PERSISTENT, stmt, nullptr) != SQLITE_OK) ok_ = false;
      table.values.reserve(kBatchRows * table.columns);
    }
  }
  ~SqliteSink() override {
    for (Table& t : tables_) {
      sqlite3_finalize(t.one);
      sqlite3_finalize(t.many);
    }
  }
  bool prepared() const { return ok_; }

  bool row(TableId id, const Value* values) override {
    Table& table = tables_[size_t(id)];
    if (!table.one) return true;  // a table --tables leaves out
    // The row's text is borrowed until this returns: it is kept in the table's arena, the value
    // holding its offset there until the batch is bound.
    for (size_t i = 0; i < table.columns; ++i) {
      Value v = values[i];
      if (v.kind == Value::Kind::kText) {
        v.i = int64_t(table.text.size());
        table.text.append(v.t);
      }
      table.values.push_back(v);
    }
    if (++table.rows < kBatchRows) return true;
    return insert(table, table.many, 0, kBatchRows) && clear(table);
  }

  // The rows of partial batches, one statement each; before the transaction is committed.
  bool finish() {
    for (Table& table : tables_)
      for (size_t r = 0; r < table.rows; ++r)
        if (!insert(table, table.one, r, 1)) return false;
    for (Table& table : tables_) clear(table);
    return true;
  }

 private:
  struct Table {
    sqlite3_stmt* one = nullptr;   // INSERT of one row
    sqlite3_stmt* many = nullptr;  // INSERT of kBatchRows rows
    size_t columns = 0, rows = 0;
    std::vector<Value> values;  // rows * columns, text as offsets into `text`
    std::string text;
  };

  // Binds `rows` rows from row `first` of the table's batch to `stmt` and runs it.
  static bool insert(Table& table, sqlite3_stmt* stmt, size_t first, size_t rows) {
    const Value* values = table.values.data() + first * table.columns;
    for (size_t i = 0; i < rows * table.columns; ++i) {
      const Value& v = values[i];
      const int column = int(i) + 1;
      switch (v.kind) {
        case Value::Kind::kNull: sqlite3_bind_null(stmt, column); break;
        case Value::Kind::kInt: sqlite3_bind_int64(stmt, column, v.i); break;
        case Value::Kind::kReal: sqlite3_bind_double(stmt, column, v.d); break;
        // SQLITE_STATIC: the arena is cleared only after the statement has run.
        case Value::Kind::kText:
          sqlite3_bind_text64(stmt, column, table.text.data() + v.i, v.t.size(), SQLITE_STATIC, SQLITE_UTF8);
          break;
      }
    }
    const int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE;
  }

  static bool clear(Table& table) {
    table.values.clear();
    table.text.clear();
    table.rows = 0;
    return true;
  }

  std::vector<Table> tables_;
  bool ok_ = true;
};

}  // namespace

ExportResult write_sqlite(reader::TraceReader& reader, const std::string& path, const ExportOptions& options,
                          std::string& error) {
  ExportResult result;
  sqlite3* raw = nullptr;
  // NOMUTEX: one thread uses the connection, and the serialised mode's locks cost a tenth of the time.
  if (sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    error = "cannot create the database " + path + " (" + (raw ? sqlite3_errmsg(raw) : "out of memory") + ")";
    sqlite3_close(raw);
    return result;
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  // The file is a temporary one, moved into place only when complete: no journal is needed, and one
  // transaction holds every row.
  char* message = nullptr;
  std::vector<bool> kept(export_tables().size(), true);
  if (!options.tables.empty()) {
    const std::regex pattern(options.tables, std::regex::icase);  // checked by the command line
    for (const TableDef& t : export_tables()) kept[size_t(t.id)] = std::regex_match(t.name, pattern);
  }
  const std::string setup = "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; "
                            "PRAGMA cache_size=-65536; BEGIN;\n" + schema_sql(kept);
  if (sqlite3_exec(db.get(), setup.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    error = "cannot write " + path + " (" + (message ? message : "?") + ")";
    sqlite3_free(message);
    return result;
  }
  TableCounts counts;
  bool ok;
  {
    SqliteSink sink(db.get(), kept);
    ok = sink.prepared() && produce_tables(reader, options, sink, &counts) && sink.finish();
  }
  // --lazy: the tables no row went into are dropped, in the same transaction.
  for (const TableDef& t : export_tables()) {
    if (!ok || !options.lazy || !kept[size_t(t.id)]) continue;
    const std::string name = std::string("\"") + t.name + "\"";
    sqlite3_stmt* probe = nullptr;
    ok = sqlite3_prepare_v2(db.get(), ("SELECT 1 FROM " + name + " LIMIT 1").c_str(), -1, &probe, nullptr) == SQLITE_OK;
    const int rc = ok ? sqlite3_step(probe) : SQLITE_ERROR;
    sqlite3_finalize(probe);
    ok = rc == SQLITE_ROW || (rc == SQLITE_DONE &&
                              sqlite3_exec(db.get(), ("DROP TABLE " + name).c_str(), nullptr, nullptr, &message) == SQLITE_OK);
  }
  if (!ok || sqlite3_exec(db.get(), "COMMIT;", nullptr, nullptr, &message) != SQLITE_OK) {
    error = "cannot write " + path + " (" + (message ? message : sqlite3_errmsg(db.get())) + ")";
    sqlite3_free(message);
    return result;
  }
  result.written = reader::thousands(counts.calls) + (counts.calls == 1 ? " call, " : " calls, ") +
                   reader::thousands(counts.gpu) + (counts.gpu == 1 ? " GPU operation, " : " GPU operations, ") +
                   reader::thousands(counts.nvtx) + (counts.nvtx == 1 ? " NVTX event" : " NVTX events");
  if (counts.samples)
    result.written += ", " + reader::thousands(counts.samples) + (counts.samples == 1 ? " sample" : " samples");
  result.notes = counts.notes;
  return result;
}

}  // namespace cutrace::exporting
