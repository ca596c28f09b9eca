// NVTX ranges from the reader's NVTX events: push/pop ranges pair on their thread and domain (the
// innermost open range of the domain closes), start/end ranges pair by id within their process, on any
// thread. A range is handed on when it closes, with what the push/pop reports need (its level, its
// parent, the time of its direct children). Only open ranges are held.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader/trace_reader.h"

namespace cutrace::model {

struct NvtxRange {
  bool push_pop = true;        // false: a start/end range
  uint64_t start_ns = 0, end_ns = 0;
  const reader::Thread* thread = nullptr;      // where it opened
  const reader::Thread* end_thread = nullptr;  // where it closed (start/end ranges may close elsewhere)
  uint32_t domain = 0;
  std::string name;       // as nsys shows a range: "<domain>:<message>", ":<message>" in the default domain
  std::string message;    // the message alone
  uint64_t id = 0;        // numbered in the order ranges open, from 1, across the trace
  // The attributes it opened with (nvtxRangePushEx, nvtxDomainRangeStartEx); an extended payload
  // given only when it closed (nvtxRangePopPayload, nvtxRangeEndPayload: NCCL's ncclCommInitRank
  // knows its communicator only then) is its payload too.
  uint32_t category = 0;
  std::optional<uint32_t> color;  // ARGB
  abi::NvtxPayload payload_type = abi::NvtxPayload::kNone;
  uint64_t payload = 0;  // kExtension: the schema id
  std::string payload_bytes;  // kExtension: the bytes recorded (reader::NvtxEvent::payload_bytes)
  uint8_t payload_cut = 0;
  // Push/pop only.
  uint32_t level = 0;     // 0 = outermost on its thread and domain
  uint64_t parent_id = 0;  // 0: none
  uint64_t child_ns = 0;   // the time of its direct children
  uint32_t children = 0;
  std::string stack;      // ":1:4:9", the ids from the outermost range to this one
  std::string name_tree;  // the name of the outermost range, then ":<message>" of each one inside it
};

class NvtxRangeTracker {
 public:
  using Visit = std::function<void(const NvtxRange&)>;
  explicit NvtxRangeTracker(Visit visit) : visit_(std::move(visit)) {}

  // Feeds one event; a range that closes is visited at once.
  void add(const reader::TraceReader& reader, const reader::Event& ev);
  // Pops with nothing open, ends of ranges never started: counted, not shown.
  uint64_t unmatched() const { return unmatched_ + ended_early_.size(); }
  // Ranges still open (the program ended, or was cut off, inside them); not shown.
  uint64_t open() const;

 private:
  Visit visit_;
  // (thread index << 32 | domain) -> its open push/pop ranges, innermost last.
  std::unordered_map<uint64_t, std::vector<NvtxRange>> stacks_;
  // (process index << 40 ^ range id) -> the open start/end range.
  std::unordered_map<uint64_t, NvtxRange> started_;
  // A range ended on one thread is read before its start when the ending thread's ring was drained
  // first; its end waits here for the start.
  struct EarlyEnd {
    uint64_t time_ns;
    const reader::Thread* thread;
    uint64_t payload = 0;  // an extended payload given with the end: its schema id and bytes
    std::string payload_bytes;
    uint8_t payload_cut = 0;
  };
  std::unordered_map<uint64_t, EarlyEnd> ended_early_;
  uint64_t next_id_ = 1;
  uint64_t unmatched_ = 0;
};

// "<domain>:<message>" as nsys names a range: the domain's name, empty for the default domain (or the
// domain's number when the trace never named it).
std::string nvtx_range_name(const reader::TraceReader& reader, const reader::Thread& thread, uint32_t domain,
                            std::string_view message);

// --filter-nvtx RANGE[@DOMAIN|@*][/INDEX], as nsys stats takes it: the ranges whose message is RANGE,
// in the default domain, in DOMAIN or in any, every instance or only the INDEXth (1-based, in the
// order they started).
struct NvtxFilter {
  bool on = false;
  std::string range;
  enum class Domain { kDefault, kAny, kNamed } domain = Domain::kDefault;
  std::string domain_name;
  uint64_t index = 0;  // 0 = every instance
};
bool parse_nvtx_filter(const std::string& text, NvtxFilter& f);
std::string describe(const NvtxFilter& f);  // "RANGE@DOMAIN/INDEX" as given

// The time windows of the ranges a filter selects, per process index, sorted by start.
using NvtxWindows = std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>>;
// Reads the trace at `path` for them; false when it cannot be opened. `found`: instances that matched.
bool collect_nvtx_windows(const std::string& path, const NvtxFilter& f, NvtxWindows& windows, uint64_t& found);
// Whether [from, to] lies inside one of the process's windows.
bool inside_nvtx_windows(const NvtxWindows& windows, uint32_t process, uint64_t from, uint64_t to);

}  // namespace cutrace::model
