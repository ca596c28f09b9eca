// The device timeline: streams, events and the operations queued on them, and the device thread that
// completes those operations in device-time order. The timing model is described in simcuda.h.
//
// Every operation gets its start and end time when it is submitted, from the state of the streams at
// that moment, so nothing about an operation's timing depends on how promptly the device thread runs.
// The device thread completes operations in (end, submission order) order, never before their end.
// That order is also a dependency order (an operation starts no earlier than the end of everything
// it waits for, and was submitted after it), and it is the order in which completions happen in real
// time: an operation submitted later starts no earlier than "now", which is past the end of anything
// already completed. So "operation X is complete" is simply "the last completed key >= X's key".
#pragma once

#include <pthread.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

#include "activity.h"
#include "config.h"
#include "sync.h"

namespace simcuda {

using StreamId = uint64_t;
using EventId = uint64_t;

// Orders operations: by end time, then by submission.
struct OpKey {
  uint64_t end_ns = 0;
  uint64_t seq = 0;
  auto operator<=>(const OpKey&) const = default;
};

enum class OpKind : uint8_t { kKernel, kMemcpy, kMemset, kEventRecord, kStreamWait, kHostFunc, kFree };

// What a caller asks the device to do.
struct Work {
  OpKind kind = OpKind::kKernel;
  uint64_t duration_ns = 0;
  // Run on the device thread once the operation's end time has passed; empty for pure timing.
  std::function<void()> effect;
  // Set only while a profiler listens (activity::active()): reported when the operation completes.
  std::shared_ptr<const activity::OpInfo> info;
};

// When a submitted operation occupies the device.
struct OpTimes {
  OpKey key;
  uint64_t start_ns = 0;
};

struct StreamInfo {
  int device = 0;
  unsigned flags = 0;  // kStreamNonBlocking or 0
  int priority = 0;
  bool legacy = false;
  bool per_thread = false;
};

struct EventInfo {
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
};

inline constexpr unsigned kStreamNonBlocking = 0x1;  // cudaStreamNonBlocking / CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDisableTiming = 0x2;  // cudaEventDisableTiming / CU_EVENT_DISABLE_TIMING

class SIMCUDA_API Timeline {
 public:
  Timeline();

  // The legacy default stream of a device; it always exists.
  StreamId legacy_stream(int device) const { return StreamId(device) + 1; }
  Status create_stream(int device, unsigned flags, int priority, bool per_thread, StreamId* out);
  // Work already submitted to the stream still runs; the id is invalid from now on.
  Status destroy_stream(StreamId id);
  Status stream_info(StreamId id, StreamInfo* out);

  Status submit(StreamId stream, Work work, OpTimes* times = nullptr);
  // Submits the operations in order as of one moment, so that each starts when the one before it
  // ends (a graph launch); their times are appended to *times.
  Status submit_all(StreamId stream, std::vector<Work> works, std::vector<OpTimes>* times = nullptr);
  // kOk once everything submitted to the stream so far is complete, else kNotReady.
  Status query_stream(StreamId stream);
  Status synchronize_stream(StreamId stream);
  void synchronize_device(int device);
  // Waits for everything submitted to every device so far.
  void synchronize_all();

  Status create_event(int device, unsigned flags, EventId* out);
  Status destroy_event(EventId id);
  Status event_info(EventId id, EventInfo* out);
  Status record_event(EventId event, StreamId stream, OpTimes* times = nullptr);
  // Makes all later work in the stream wait for the event's last record (nothing if never recorded).
  Status stream_wait_event(StreamId stream, EventId event);
  Status query_event(EventId event);
  Status synchronize_event(EventId event);
  // Device time between the two records in ns: kNotReady until both are complete, kInvalidHandle
  // for an unknown, never-recorded or timing-disabled event.
  Status elapsed_ns(EventId start, EventId end, int64_t* out);

  // cudaDeviceReset: pending work of the device loses its effects (it still occupies its time, which
  // no one waits for any more), its streams other than the legacy one and its events are destroyed,
  // and its stream state starts afresh. Returns once no effect of the device is running.
  void reset_device(int device);

  // Blocks until the operation with this key is complete.
  void wait(OpKey key);
  bool complete(OpKey key);

  // Stops the device thread at exit; later waits complete operations on the waiting thread.
  void shutdown();

  void prepare_fork();
  void parent_after_fork();
  void child_after_fork();

 private:
  struct Stream {
    StreamInfo info;
    uint64_t tail_end_ns = 0;  // end of the last operation submitted
    OpKey last;                // key of the last operation submitted
  };
  struct Event {
    EventInfo info;
    uint64_t time_ns = 0;  // start of the last record operation
    OpKey key;             // its key
  };
  struct DeviceState {
    uint64_t legacy_end_ns = 0;    // end of the last legacy-stream operation
    uint64_t blocking_end_ns = 0;  // latest end of any blocking-stream operation
    OpKey last;                    // the latest key submitted to the device
  };
  struct Op {
    int device = 0;
    StreamId stream = 0;
    uint64_t start_ns = 0;
    Work work;
  };

  Stream* find_stream_locked(StreamId id);
  Event* find_event_locked(EventId id);
  OpTimes submit_locked(StreamId id, Stream& s, Work work, uint64_t not_before_ns, uint64_t now);
  void ensure_worker_locked();
  // Completes the earliest operation if its end time has passed (the lock is released while its
  // effect runs) and returns true; otherwise stores when it will be due and returns false.
  bool run_due_locked(uint64_t* next_due_ns);
  void wait_locked(OpKey key);
  void worker_loop();
  static void* worker_main(void* self);
  static void shutdown_at_exit();

  Mutex mu_;
  CondVar cv_;  // any change: new work, a completion, shutdown
  std::unordered_map<StreamId, Stream> streams_;
  std::unordered_map<EventId, Event> events_;
  std::vector<DeviceState> devices_;
  std::map<OpKey, Op> queue_;
  OpKey completed_;  // key of the last completed operation
  OpKey last_all_;   // latest key submitted to any device
  uint64_t next_seq_ = 0;
  uint64_t next_id_;
  bool in_flight_ = false;  // an effect is running outside the lock
  bool worker_running_ = false;
  bool shutdown_ = false;
  bool exit_hook_registered_ = false;
  pthread_t worker_{};
};

SIMCUDA_API Timeline& timeline();

}  // namespace simcuda
