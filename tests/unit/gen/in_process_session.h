// A one-ring session in the test's own memory, attached to the calling thread as the shim would attach
// it, for tests that link the shim's objects and read back what they write (recording_test.cpp,
// gpu_activity_test.cpp). No recorder, no shared memory: the test drains the ring itself.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "cutrace/abi.h"
#include "cutrace/ring.h"
#include "cutrace/session.h"
#include "runtime.h"

namespace cutrace::test {

class InProcessSession {
 public:
  static constexpr uint32_t kRingBytes = 1u << 20;

  // Maps the session, makes it the shim's, and gives the calling thread its ring.
  void attach() {
    bytes_ = abi::session_bytes(1, kRingBytes);
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    session::Options options;  // capture on for CUDA, no backtraces, the launcher's defaults otherwise
    options.clock = abi::ClockKind::kMonotonicNs;
    session_ = session::init_header(p, bytes_, 1, kRingBytes, options);
    ASSERT_TRUE(abi::session_layout_valid(session_, bytes_));
    ring_ = abi::slot_header(session_, 0);
    ring_->tid = uint32_t(syscall(SYS_gettid));
    saved_session_ = preload::g_session;
    preload::g_session = session_;
    preload::g_clock_is_tsc = false;
    // A thread with a ring never goes through prepare_thread(), which would look for a real session.
    preload::t_thread.producer.attach(ring_, abi::slot_data(session_, 0), kRingBytes);
  }

  void detach() {
    preload::t_thread.producer = ring::Producer{};
    preload::g_session = saved_session_;
    if (session_) munmap(session_, bytes_);
    session_ = nullptr;
  }

  // Every record written since the last call, whole, to `each(const uint8_t* record, uint32_t bytes)`.
  template <class Each>
  void drain(Each each) {
    std::vector<uint8_t> scratch(64 * 1024);
    ring::drain(ring_, abi::slot_data(session_, 0), kRingBytes, scratch.data(), uint32_t(scratch.size()), UINT64_MAX, each);
  }

  abi::SessionHeader* session() const { return session_; }
  abi::RingHeader* ring() const { return ring_; }

 private:
  size_t bytes_ = 0;
  abi::SessionHeader* session_ = nullptr;
  abi::SessionHeader* saved_session_ = nullptr;
  abi::RingHeader* ring_ = nullptr;
};

}  // namespace cutrace::test
