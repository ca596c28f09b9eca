// The timeline in Perfetto's protobuf format (perfetto.h says what goes where).
#pragma once

#include <cstdio>
#include <memory>

#include "model/timeline.h"

namespace cutrace::exporting {

// Writes the packets of a Trace message to `out` as items come; one sink takes any number of traces
// (a job's) in turn. Everything is written when it is destroyed.
class ProtoSink final : public model::TimelineSink {
 public:
  explicit ProtoSink(FILE* out);
  ~ProtoSink() override;

  void name_process(uint32_t pid, const std::string& name) override;
  void name_thread(uint32_t pid, uint32_t tid, const std::string& name) override;
  void name_gpu_track(uint32_t pid, uint32_t track, const std::string& name) override;
  void slice(uint32_t pid, uint32_t tid, const model::TimelineSlice& s) override;
  void range(uint32_t pid, uint32_t tid, const model::TimelineSlice& s) override;
  void gpu_slice(uint32_t pid, uint32_t track, const model::TimelineSlice& s, uint64_t flow) override;
  void flow_start(uint32_t pid, uint32_t tid, int64_t time_ns, uint32_t api_id, uint64_t flow) override;
  void async_slice(uint32_t pid, std::string_view track_name, std::string_view name, const char* category, uint64_t id,
                   uint32_t begin_tid, int64_t begin_ns, uint32_t end_tid, int64_t end_ns,
                   const model::TimelineArgs& args) override;
  void off_cpu(uint32_t pid, uint32_t tid, std::string_view name, int64_t begin_ns, int64_t end_ns) override;
  void instant(uint32_t pid, uint32_t tid, std::string_view name, const char* category, int64_t time_ns,
               const model::TimelineArgs& args) override;
  void counter(uint32_t pid, std::string_view name, std::string_view arg, int64_t time_ns, int64_t value) override;
  void end_of_trace() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cutrace::exporting
