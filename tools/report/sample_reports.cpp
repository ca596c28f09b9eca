// The reports of samples: cpu_sample_sum, python_sample_sum and cpu_ctxsw_sum.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "reader/decode.h"
#include "model/symbolizer.h"
#include "report/report_support.h"

namespace cutrace::report {
namespace {

using model::ResolvedAddress;
using model::Symbolizer;
using reader::ApiCall;
using reader::ApiSpec;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

// cpu_sample_sum: where the CPU samples (-s cpu) found the threads, per function (the innermost frame
// of each sample, named from the binaries; inlined code counts for the function it was inlined into's
// innermost inlined function), most samples first. A frame no symbol names counts for its module.
class CpuSampleSum : public Report {
 public:
  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind != EventKind::kCpuSample || ev.sample.frame_count == 0) return;
    const ResolvedAddress& where = symbols_.resolve(reader.process_of(*ev.thread), ev.sample.frames[0], ev.sample.time_ns, true);
    std::string function = where.frames.empty() ? "[unknown]" : where.frames.front().function;
    std::string key = function + '\x1f' + where.module;
    auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
    if (added) rows_.push_back(Row{std::move(function), where.module.empty() ? "[unknown]" : where.module, 0});
    ++rows_[it->second].samples;
    ++total_;
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    Table table;
    table.title = "CPU Samples by Function (cpu_sample_sum)";
    table.columns = {"Samples (%)", "Samples", "Function", "Module"};
    std::vector<const Row*> order;
    for (const Row& r : rows_) order.push_back(&r);
    std::sort(order.begin(), order.end(), [](const Row* a, const Row* b) {
      if (a->samples != b->samples) return a->samples > b->samples;
      return a->function != b->function ? a->function < b->function : a->module < b->module;
    });
    for (const Row* r : order)
      table.rows.push_back({Cell::decimal(100.0 * double(r->samples) / double(total_)), Cell::integer(r->samples),
                            Cell::string(r->function), Cell::string(r->module)});
    replay(table, sink);
    return true;
  }

  std::vector<std::string> notes() const override { return symbols_.notes(); }

 private:
  struct Row {
    std::string function, module;
    uint64_t samples;
  };
  Symbolizer symbols_;
  std::vector<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t total_ = 0;
};

// python_sample_sum: where the Python samples (--python-sampling) found the threads, per Python
// function: the samples it was running in (Self: the innermost frame) and those it was on the stack of
// (Total: counted once per sample, however deep its recursion), most self samples first.
class PythonSampleSum : public Report {
 public:
  void add(TraceReader& reader, const Event& ev) override {
    if (ev.kind != EventKind::kPythonSample || ev.python_sample.frame_count == 0) return;
    const reader::Process& process = reader.process_of(*ev.thread);
    std::unordered_set<size_t> on_stack;
    for (uint32_t i = 0; i < ev.python_sample.frame_count; ++i) {
      const abi::PythonFrame& frame = ev.python_sample.frames[i];
      auto known = process.python_functions.find(frame.function);
      std::string function, file;
      if (known != process.python_functions.end()) {
        function = known->second.name;
        file = known->second.file;
      } else {
        function = "python function " + reader::hex(frame.function);
      }
      std::string key = function + '\x1f' + file;
      auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
      if (added) rows_.push_back(Row{std::move(function), std::move(file), 0, 0});
      if (i == 0) ++rows_[it->second].self;
      if (on_stack.insert(it->second).second) ++rows_[it->second].total;
    }
    ++samples_;
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    Table table;
    table.title = "Python Samples by Function (python_sample_sum)";
    table.columns = {"Self (%)", "Self Samples", "Total (%)", "Total Samples", "Function", "File"};
    std::vector<const Row*> order;
    for (const Row& r : rows_) order.push_back(&r);
    std::sort(order.begin(), order.end(), [](const Row* a, const Row* b) {
      if (a->self != b->self) return a->self > b->self;
      if (a->total != b->total) return a->total > b->total;
      return a->function != b->function ? a->function < b->function : a->file < b->file;
    });
    for (const Row* r : order)
      table.rows.push_back({Cell::decimal(100.0 * double(r->self) / double(samples_)), Cell::integer(r->self),
                            Cell::decimal(100.0 * double(r->total) / double(samples_)), Cell::integer(r->total),
                            Cell::string(r->function), Cell::string(r->file)});
    replay(table, sink);
    return true;
  }

 private:
  struct Row {
    std::string function, file;
    uint64_t self, total;
  };
  std::vector<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t samples_ = 0;
};

// cpu_ctxsw_sum: per thread, how often --cpuctxsw saw it leave its CPU (blocked, or preempted while
// runnable) and how long it was off CPU, most time off CPU first. The thread's switches are ordered by
// time first: each CPU's are read in turn.
class CpuCtxswSum : public Report {
 public:
  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kContextSwitch) return;
    changes_[ev.thread->index].push_back({ev.context_switch.time_ns, ev.context_switch.change});
  }

  uint64_t row_count(TraceReader&) override { return changes_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    struct Row {
      const reader::Thread* thread;
      uint64_t blocked = 0, preempted = 0;
      DurationTotals off;
    };
    std::vector<Row> rows;
    for (auto& [index, changes] : changes_) {
      std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) { return a.time < b.time; });
      Row row{&reader.threads()[index], 0, 0, {}};
      uint64_t left = 0;
      bool off = false;
      for (const Change& c : changes) {
        if (c.change == abi::ContextSwitch::kIn) {
          if (off) row.off.add(c.time - left);
          off = false;
        } else {
          ++(c.change == abi::ContextSwitch::kPreempted ? row.preempted : row.blocked);
          left = c.time;
          off = true;
        }
      }
      rows.push_back(row);
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      if (a.off.total != b.off.total) return a.off.total > b.off.total;
      return a.thread->index < b.thread->index;
    });
    Table table;
    table.title = "CPU Context Switches per Thread (cpu_ctxsw_sum)";
    table.columns = {"Off-CPU Time (ns)", "Switches Out", "Blocked", "Preempted", "Avg Off (ns)", "Max Off (ns)",
                     "Pid", "Tid", "Thread Name"};
    for (const Row& r : rows)
      table.rows.push_back({Cell::integer(r.off.total), Cell::integer(r.blocked + r.preempted), Cell::integer(r.blocked),
                            Cell::integer(r.preempted),
                            Cell::decimal(r.off.count ? double(r.off.total) / double(r.off.count) : 0.0),
                            Cell::integer(r.off.max), Cell::integer(r.thread->pid), Cell::integer(r.thread->tid),
                            Cell::string(r.thread->name)});
    replay(table, sink);
    return true;
  }

 private:
  struct Change {
    uint64_t time;
    abi::ContextSwitch change;
  };
  struct DurationTotals {
    uint64_t count = 0, total = 0, max = 0;
    void add(uint64_t d) {
      ++count;
      total += d;
      max = std::max(max, d);
    }
  };
  std::map<uint32_t, std::vector<Change>> changes_;  // by thread index
};

}  // namespace

std::unique_ptr<Report> make_cpu_sample_sum() { return std::make_unique<CpuSampleSum>(); }
std::unique_ptr<Report> make_python_sample_sum() { return std::make_unique<PythonSampleSum>(); }
std::unique_ptr<Report> make_cpu_ctxsw_sum() { return std::make_unique<CpuCtxswSum>(); }

}  // namespace cutrace::report
