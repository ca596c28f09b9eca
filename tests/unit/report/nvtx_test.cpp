// NVTX records and capture ranges through the reader and the range pairing the reports share: names
// applied per process, registered messages resolved, push/pop paired per thread and domain, an end
// read before its start (its thread's ring drained first), capture ranges delivered in order.
#include <gtest/gtest.h>

#include <vector>

#include "reader/trace_reader.h"
#include "model/nvtx_ranges.h"
#include "trace_builder.h"

namespace cutrace::testing {
namespace {

using abi::NvtxEvent;

TEST(NvtxReading, NamesEventsRangesAndCaptureState) {
  const std::string path = temp_path("nvtx.cutrace");
  write_nvtx_trace(path);
  reader::TraceReader trace;
  ASSERT_TRUE(trace.open(path)) << trace.error();
  std::vector<model::NvtxRange> ranges;
  model::NvtxRangeTracker tracker([&](const model::NvtxRange& r) { ranges.push_back(r); });
  std::vector<std::string> marks;
  std::vector<std::pair<bool, uint32_t>> captures;
  size_t nvtx_events = 0, naming_records = 0;
  reader::Event ev;
  while (trace.next(ev)) {
    tracker.add(trace, ev);
    if (ev.kind == reader::EventKind::kNvtx) {
      ++nvtx_events;
      if (ev.nvtx.type == NvtxEvent::kMark) {
        marks.emplace_back(ev.nvtx.text);
        EXPECT_EQ(ev.nvtx.domain, 1u);
        EXPECT_EQ(ev.nvtx.category, 3u);
      }
    } else if (ev.kind == reader::EventKind::kRecord && ev.record.kind == uint16_t(abi::RecordKind::kNvtx)) {
      ++naming_records;
    } else if (ev.kind == reader::EventKind::kCapture) {
      captures.emplace_back(ev.capture.begin, ev.capture.range);
      EXPECT_EQ(ev.capture.reason, abi::CaptureReason::kNvtx);
    }
  }
  EXPECT_EQ(nvtx_events, 12u);
  EXPECT_EQ(naming_records, 4u);
  EXPECT_EQ(marks, std::vector<std::string>{"m"});
  EXPECT_EQ(captures, (std::vector<std::pair<bool, uint32_t>>{{true, 1}, {false, 1}}));

  const reader::Process& p = trace.processes().at(0);
  EXPECT_EQ(p.nvtx_domains.at(1), "dom");
  EXPECT_EQ(p.nvtx_strings.at(5), "reg");
  EXPECT_EQ(p.nvtx_categories.at(uint64_t(1) << 32 | 3), "phase");
  EXPECT_EQ(p.nvtx_thread_names.at(500), "main thread");

  // Closing order: dom:#77, dom:reg, :inner, :se (its end came first), :outer.
  ASSERT_EQ(ranges.size(), 5u);
  EXPECT_EQ(ranges[0].name, "dom:#77");
  EXPECT_EQ(ranges[0].level, 0u);
  EXPECT_EQ(ranges[1].name, "dom:reg");
  ranges.erase(ranges.begin());
  EXPECT_EQ(ranges[1].name, ":inner");
  EXPECT_EQ(ranges[1].level, 1u);
  EXPECT_EQ(ranges[1].name_tree, ":outer:inner");
  EXPECT_EQ(ranges[2].name, ":se");
  EXPECT_FALSE(ranges[2].push_pop);
  EXPECT_EQ(ranges[2].end_ns - ranges[2].start_ns, 200u);
  EXPECT_EQ(ranges[2].end_thread->tid, 501u);
  EXPECT_EQ(ranges[3].name, ":outer");
  EXPECT_EQ(ranges[3].end_ns - ranges[3].start_ns, 200u);
  EXPECT_EQ(ranges[3].children, 1u);
  EXPECT_EQ(ranges[3].child_ns, 20u);
  EXPECT_EQ(ranges[1].parent_id, ranges[3].id);
  EXPECT_EQ(ranges[1].stack, ":" + std::to_string(ranges[3].id) + ":" + std::to_string(ranges[1].id));
  EXPECT_EQ(tracker.unmatched(), 1u);
  EXPECT_EQ(tracker.open(), 0u);
}

}  // namespace
}  // namespace cutrace::testing
