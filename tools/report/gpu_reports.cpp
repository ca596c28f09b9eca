// The reports of GPU activity (CUPTI): the kernel and memory sums, cuda_gpu_trace,
// cuda_kern_exec_trace and cuda_api_gpu_sum.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "reader/decode.h"
#include "report/report_support.h"

namespace cutrace::report {
namespace {

using model::KernelNames;
using model::SpillSorter;
using model::base_kernel_name;
using model::is_counted_call;
using model::kCudaFamily;
using reader::ApiCall;
using reader::ApiSpec;
using reader::Event;
using reader::EventKind;
using reader::TraceReader;

// --- GPU activity (CUPTI) ---

std::string memory_operation(const reader::GpuActivityEvent& g) { return reader::gpu_memory_operation(g.kind, g.copy_kind); }

bool is_gpu_work(const Event& ev) {
  return ev.kind == EventKind::kGpuActivity &&
         (ev.gpu.kind == abi::GpuActivity::kKernel || ev.gpu.kind == abi::GpuActivity::kMemcpy ||
          ev.gpu.kind == abi::GpuActivity::kMemset);
}


// cuda_gpu_kern_sum, cuda_gpu_mem_time_sum: per kernel name, or per memory operation, nsys's duration
// statistics of what the GPU ran.
class GpuTimeSum : public Report {
 public:
  GpuTimeSum(const char* title, bool kernels, KernelNames names) : title_(title), kernels_(kernels), names_(names) {}

  void add(TraceReader&, const Event& ev) override {
    if (!is_gpu_work(ev) || (ev.gpu.kind == abi::GpuActivity::kKernel) != kernels_) return;
    std::string name = kernels_ ? kernel_display_name(ev.gpu, names_) : memory_operation(ev.gpu);
    auto [it, added] = row_by_name_.emplace(std::move(name), rows_.size());
    if (added) rows_.emplace_back().name = &it->first;
    if (rows_[it->second].stats.add(ev.gpu.duration_ns())) spill_when_over_budget(rows_, held_, ok_);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    uint64_t grand_total = 0;
    const std::vector<Row*> order =
        by_total_time(rows_, grand_total, [](const Row& a, const Row& b) { return *a.name < *b.name; });
    Table table;
    table.title = title_;
    table.columns = {"Time (%)", "Total Time (ns)", kernels_ ? "Instances" : "Count", "Avg (ns)", "Med (ns)",
                     "Min (ns)", "Max (ns)",        "StdDev (ns)", kernels_ ? "Name" : "Operation"};
    for (Row* r : order) {
      std::vector<Cell>& row = table.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(*r->name));
    }
    replay(table, sink);
    return ok_;
  }

 private:
  struct Row {
    const std::string* name = nullptr;
    DurationStats stats;
  };
  const char* title_;
  bool kernels_;
  KernelNames names_;
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_name_;
  uint64_t held_ = 0;
  bool ok_ = true;
};

// cuda_gpu_mem_size_sum: per memory operation, the statistics of the bytes moved or set, in MB
// (10^6 bytes) as nsys shows them, most bytes first.
class GpuSizeSum : public Report {
 public:
  void add(TraceReader&, const Event& ev) override {
    if (!is_gpu_work(ev) || ev.gpu.kind == abi::GpuActivity::kKernel) return;
    auto [it, added] = row_by_name_.emplace(memory_operation(ev.gpu), rows_.size());
    if (added) rows_.emplace_back().name = &it->first;
    if (rows_[it->second].stats.add(ev.gpu.bytes)) spill_when_over_budget(rows_, held_, ok_);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    uint64_t grand_total = 0;
    const std::vector<Row*> order =
        by_total_time(rows_, grand_total, [](const Row& a, const Row& b) { return *a.name < *b.name; });
    Table table;
    table.title = "GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum)";
    table.columns = {"Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)", "Operation"};
    for (Row* r : order) {
      // The byte statistics, then each cell but the count scaled to MB.
      std::vector<Cell> bytes;
      r->stats.append_cells(bytes, grand_total, &ok_);
      auto mb = [](double v) { return Cell::decimal(v / 1e6, 3); };
      table.rows.push_back({mb(double(r->stats.total)), Cell::integer(r->stats.count), mb(bytes[3].d),
                            mb(bytes[4].d), mb(double(r->stats.min)), mb(double(r->stats.max)),
                            mb(bytes[7].d), Cell::string(*r->name)});
    }
    replay(table, sink);
    return ok_;
  }

 private:
  struct Row {
    const std::string* name = nullptr;
    DurationStats stats;
  };
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_name_;
  uint64_t held_ = 0;
  bool ok_ = true;
};

// cuda_gpu_trace: every kernel, copy and set the GPU ran, by start time, with nsys's columns. Rows
// are sorted through temporary files in bounded memory; names are looked up when written.
class GpuTrace : public Report {
 public:
  explicit GpuTrace(KernelNames names) : style_(names) {}

  void add(TraceReader&, const Event& ev) override {
    if (!is_gpu_work(ev)) return;
    const reader::GpuActivityEvent& g = ev.gpu;
    Row r{};
    r.start = g.start_ns;
    r.duration = g.duration_ns();
    r.bytes = g.bytes;
    r.name = g.kind == abi::GpuActivity::kKernel && g.name ? std::hash<std::string>{}(g.name->mangled) : 0;
    r.order = next_++;
    r.process = ev.thread->process;
    // A copy issued through the runtime carries the driver call's id and the runtime call's: the
    // runtime call's is the one cuda_api_trace shows, so it is the one that joins the two.
    r.correlation = g.runtime_correlation ? g.runtime_correlation : g.correlation;
    r.device = g.device, r.context = g.context, r.stream = g.stream;
    std::copy(std::begin(g.grid), std::end(g.grid), r.grid);
    std::copy(std::begin(g.block), std::end(g.block), r.block);
    r.registers = g.registers_per_thread;
    r.static_shared = g.static_shared_bytes, r.dynamic_shared = g.dynamic_shared_bytes;
    r.kind = uint8_t(g.kind), r.copy_kind = g.copy_kind, r.src_kind = g.src_kind, r.dst_kind = g.dst_kind;
    if (g.kind == abi::GpuActivity::kMemset) r.src_kind = uint8_t(g.memory_kind);  // what it set
    if (r.name) names_.emplace(r.name, kernel_display_name(g, style_));
    rows_.push(r);
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader& reader, TableSink& sink) override {
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    sink.begin("CUDA GPU Trace (cuda_gpu_trace)",
               {"Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd",
                "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd", "DstMemKd", "Device",
                "Ctx", "GreenCtx", "Strm", "Name"});
    std::vector<Cell> cells(21);
    const bool ok = rows_.for_each([&](const Row& r) {
      const bool kernel = r.kind == uint8_t(abi::GpuActivity::kKernel);
      cells[0].set_integer(r.start > origin ? r.start - origin : 0);
      cells[1].set_integer(r.duration);
      cells[2].set_integer(r.correlation);
      for (int i = 0; i < 3; ++i) {
        if (kernel) cells[3 + i].set_integer(uint64_t(r.grid[i])), cells[6 + i].set_integer(uint64_t(r.block[i]));
        else cells[3 + i].set_borrowed("", true), cells[6 + i].set_borrowed("", true);
      }
      if (kernel) {
        cells[9].set_integer(r.registers);
        cells[10] = Cell::decimal(double(r.static_shared) / 1e6, 3);
        cells[11] = Cell::decimal(double(r.dynamic_shared) / 1e6, 3);
        for (int i = 12; i < 16; ++i) cells[i].set_borrowed("", true);
      } else {
        for (int i = 9; i < 12; ++i) cells[i].set_borrowed("", true);
        cells[12] = Cell::decimal(double(r.bytes) / 1e6, 3);
        // MB/s: bytes per ns is GB/s.
        cells[13] = Cell::decimal(r.duration ? double(r.bytes) * 1e3 / double(r.duration) : 0.0, 3);
        if (r.kind == uint8_t(abi::GpuActivity::kMemcpy)) {
          cells[14].set_borrowed(reader::gpu_memory_kind_name(r.src_kind));
          cells[15].set_borrowed(reader::gpu_memory_kind_name(r.dst_kind));
        } else {
          cells[14].set_borrowed(reader::gpu_memory_kind_name(r.src_kind));
          cells[15].set_borrowed("", true);
        }
      }
      if (r.device == UINT32_MAX) cells[16].set_borrowed("", true);
      else cells[16].set_integer(r.device);
      cells[17].set_integer(r.context);
      cells[18].set_borrowed("", true);
      if (r.stream == UINT32_MAX) cells[19].set_borrowed("", true);
      else cells[19].set_integer(r.stream);
      if (kernel) {
        auto it = names_.find(r.name);
        cells[20].set_borrowed(it == names_.end() ? std::string_view("[unnamed kernel]") : std::string_view(it->second));
      } else {
        name_ = reader::gpu_memory_operation(abi::GpuActivity(r.kind), r.copy_kind);
        cells[20].set_borrowed(name_);
      }
      sink.row(cells);
    });
    sink.end();
    return ok;
  }

 private:
  struct Row {
    uint64_t start, duration, bytes, name, order;
    uint32_t process, correlation, device, context, stream, registers, static_shared, dynamic_shared;
    int32_t grid[3], block[3];
    uint8_t kind, copy_kind, src_kind, dst_kind;
    uint32_t unused;
  };
  struct Earlier {
    bool operator()(const Row& a, const Row& b) const { return a.start != b.start ? a.start < b.start : a.order < b.order; }
  };
  SpillSorter<Row, Earlier> rows_;
  KernelNames style_;
  // Kernel names by a hash of the mangled name: bounded by the program's distinct kernels.
  std::unordered_map<uint64_t, std::string> names_;
  std::string name_;
  uint64_t next_ = 0;
};

// cuda_kern_exec_trace: nsys's kernel launch and execution trace: each kernel with the call that
// launched it (joined by CUPTI's correlation id through the trace's API links), when it was queued (the
// call's end), how long it waited and ran, by the call's start. A kernel whose link is not in the
// trace (CUPTI dropped it, or it came from no call CUPTI timed) has no API columns. Links and kernels
// wait for each other in bounded maps (kMaxWaiting each; the oldest give up) and rows are spill-sorted.
class KernExecTrace : public Report {
 public:
  explicit KernExecTrace(KernelNames names) : style_(names) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind != EventKind::kGpuActivity) return;
    const reader::GpuActivityEvent& g = ev.gpu;
    const uint64_t key = uint64_t(ev.thread->pid) << 32 | g.correlation;
    if (g.kind == abi::GpuActivity::kApiLink) {
      auto kernels = kernels_waiting_.equal_range(key);
      for (auto it = kernels.first; it != kernels.second; ++it) emit(it->second.row, &g);
      kernels_waiting_.erase(kernels.first, kernels.second);
      // A graph launch runs several kernels under one id: the link stays for those still to come.
      links_.insert_or_assign(key, Link{g.start_ns, g.end_ns, g.tid, g.api_id});
      link_order_.push_back(key);
      if (link_order_.size() > kMaxWaiting) {
        links_.erase(link_order_.front());
        link_order_.pop_front();
      }
      return;
    }
    if (g.kind != abi::GpuActivity::kKernel) return;
    Row row{};
    row.kernel_start = g.start_ns, row.kernel_end = g.end_ns;
    row.pid = ev.thread->pid, row.device = g.device, row.order = next_++;
    std::copy(std::begin(g.grid), std::end(g.grid), row.grid);
    std::copy(std::begin(g.block), std::end(g.block), row.block);
    row.name = g.name ? std::hash<std::string>{}(g.name->mangled) : 0;
    if (row.name) names_.emplace(row.name, kernel_display_name(g, style_));
    if (auto link = links_.find(key); link != links_.end()) {
      reader::GpuActivityEvent known;
      known.start_ns = link->second.start, known.end_ns = link->second.end;
      known.tid = link->second.tid, known.api_id = link->second.api;
      emit(row, &known);
      return;
    }
    kernels_waiting_.emplace(key, Waiting{row, next_});
    if (kernels_waiting_.size() > kMaxWaiting) {
      auto oldest = std::min_element(kernels_waiting_.begin(), kernels_waiting_.end(),
                                     [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
      emit(oldest->second.row, nullptr);
      kernels_waiting_.erase(oldest);
    }
  }

  uint64_t row_count(TraceReader&) override {
    release_all();
    return rows_.size();
  }

  bool write(TraceReader& reader, TableSink& sink) override {
    release_all();
    const uint64_t origin = reader.file_header().created_monotonic_ns;
    auto since = [&](uint64_t t) { return t > origin ? t - origin : 0; };
    sink.begin("CUDA Kernel Launch & Exec Time Trace (cuda_kern_exec_trace)",
               {"API Start (ns)", "API Dur (ns)", "Queue Start (ns)", "Queue Dur (ns)", "Kernel Start (ns)",
                "Kernel Dur (ns)", "Total Dur (ns)", "PID", "TID", "DevId", "API Function", "GridXYZ", "BlockXYZ",
                "Kernel Name"});
    std::vector<Cell> cells(14);
    const bool ok = rows_.for_each([&](const Row& r) {
      const bool linked = r.api_end != 0;
      if (linked) {
        cells[0].set_integer(since(r.api_start));
        cells[1].set_integer(r.api_end - r.api_start);
        cells[2].set_integer(since(r.api_end));
        if (r.kernel_start >= r.api_end) cells[3].set_integer(r.kernel_start - r.api_end);
        else cells[3].set_borrowed("-", true);
        cells[6].set_integer(r.kernel_end - std::min(r.api_start, r.kernel_start));
        cells[8].set_integer(r.tid);
        cells[10].set_borrowed(reader.api(r.api).display_name);
      } else {
        for (int i : {0, 1, 2, 3, 6, 8, 10}) cells[size_t(i)].set_borrowed("", true);
      }
      cells[4].set_integer(since(r.kernel_start));
      cells[5].set_integer(r.kernel_end - r.kernel_start);
      cells[7].set_integer(r.pid);
      if (r.device == UINT32_MAX) cells[9].set_borrowed("", true);
      else cells[9].set_integer(r.device);
      grid_ = std::to_string(r.grid[0]) + " " + std::to_string(r.grid[1]) + " " + std::to_string(r.grid[2]);
      block_ = std::to_string(r.block[0]) + " " + std::to_string(r.block[1]) + " " + std::to_string(r.block[2]);
      cells[11].set_borrowed(grid_);
      cells[12].set_borrowed(block_);
      auto it = names_.find(r.name);
      cells[13].set_borrowed(it == names_.end() ? std::string_view("[unnamed kernel]") : std::string_view(it->second));
      sink.row(cells);
    });
    sink.end();
    return ok;
  }

 private:
  static constexpr size_t kMaxWaiting = 1u << 20;
  struct Row {
    uint64_t api_start, api_end, kernel_start, kernel_end, name, order;
    uint32_t pid, tid, api, device;
    int32_t grid[3], block[3];
  };
  struct Link {
    uint64_t start, end;
    uint32_t tid, api;
  };
  struct Waiting {
    Row row;
    uint64_t since;
  };
  struct Earlier {
    // By the call's start; kernels without a call by their own start, after those with one at it.
    bool operator()(const Row& a, const Row& b) const {
      const uint64_t ta = a.api_end ? a.api_start : a.kernel_start, tb = b.api_end ? b.api_start : b.kernel_start;
      return ta != tb ? ta < tb : a.order < b.order;
    }
  };

  // A row with its call, when `link` gives one (api_end is never 0 then: it marks a linked row).
  void emit(Row row, const reader::GpuActivityEvent* link) {
    if (link) {
      row.api_start = link->start_ns;
      row.api_end = std::max(link->end_ns, link->start_ns + 1);
      row.tid = link->tid;
      row.api = link->api_id;
    }
    rows_.push(row);
  }

  void release_all() {
    for (auto& [key, waiting] : kernels_waiting_) emit(waiting.row, nullptr);
    kernels_waiting_.clear();
  }

  KernelNames style_;
  SpillSorter<Row, Earlier> rows_;
  std::unordered_map<uint64_t, Link> links_;        // pid << 32 | correlation -> the call
  std::deque<uint64_t> link_order_;                  // links_' keys, oldest first
  std::unordered_multimap<uint64_t, Waiting> kernels_waiting_;  // kernels whose link has not come yet
  std::unordered_map<uint64_t, std::string> names_;
  std::string grid_, block_;
  uint64_t next_ = 0;
};

// cuda_api_gpu_sum: nsys's "CUDA Summary (API/Kernels/MemOps)": the CUDA API calls (per name), the
// kernels (per name) and the memory operations (per kind) in one table, their share of the time of
// all three together.
class ApiGpuSum : public Report {
 public:
  explicit ApiGpuSum(const ReportOptions& options) : options_(options) {}

  void add(TraceReader&, const Event& ev) override {
    if (ev.kind == EventKind::kApiCall) {
      if (is_counted_call(ev.call, kCudaFamily, options_.show_internal)) add_to("CUDA_API", ev.call.api->display_name, ev.call.duration_ns());
    } else if (is_gpu_work(ev)) {
      if (ev.gpu.kind == abi::GpuActivity::kKernel)
        add_to("CUDA_KERNEL", kernel_display_name(ev.gpu, options_.kernel_names), ev.gpu.duration_ns());
      else add_to("MEMORY_OPER", memory_operation(ev.gpu), ev.gpu.duration_ns());
    }
  }

  uint64_t row_count(TraceReader&) override { return rows_.size(); }

  bool write(TraceReader&, TableSink& sink) override {
    uint64_t grand_total = 0;
    const std::vector<Row*> order = by_total_time(rows_, grand_total, [](const Row& a, const Row& b) {
      return a.category != b.category ? a.category < b.category : a.name < b.name;
    });
    Table table;
    table.title = "CUDA Summary (API/Kernels/MemOps) (cuda_api_gpu_sum)";
    table.columns = {"Time (%)", "Total Time (ns)", "Count", "Avg (ns)", "Med (ns)", "Min (ns)",
                     "Max (ns)", "StdDev (ns)",     "Category", "Operation"};
    for (Row* r : order) {
      std::vector<Cell>& row = table.rows.emplace_back();
      r->stats.append_cells(row, grand_total, &ok_);
      row.push_back(Cell::string(r->category));
      row.push_back(Cell::string(r->name));
    }
    replay(table, sink);
    return ok_;
  }

 private:
  struct Row {
    std::string category, name;
    DurationStats stats;
  };
  void add_to(const char* category, std::string_view name, uint64_t duration) {
    std::string key = std::string(category) + '\x1f';
    key += name;
    auto [it, added] = row_by_key_.emplace(std::move(key), rows_.size());
    if (added) {
      Row& r = rows_.emplace_back();
      r.category = category;
      r.name = std::string(name);
    }
    if (rows_[it->second].stats.add(duration)) spill_when_over_budget(rows_, held_, ok_);
  }
  ReportOptions options_;
  std::deque<Row> rows_;
  std::unordered_map<std::string, size_t> row_by_key_;
  uint64_t held_ = 0;
  bool ok_ = true;
};

}  // namespace

std::unique_ptr<Report> make_gpu_time_sum(const char* title, bool kernels, KernelNames names) {
  return std::make_unique<GpuTimeSum>(title, kernels, names);
}
std::unique_ptr<Report> make_gpu_size_sum() { return std::make_unique<GpuSizeSum>(); }
std::unique_ptr<Report> make_gpu_trace(KernelNames names) { return std::make_unique<GpuTrace>(names); }
std::unique_ptr<Report> make_kern_exec_trace(KernelNames names) { return std::make_unique<KernExecTrace>(names); }
std::unique_ptr<Report> make_api_gpu_sum(const ReportOptions& options) { return std::make_unique<ApiGpuSum>(options); }

}  // namespace cutrace::report
