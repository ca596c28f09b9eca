// Initialisation, contexts, stream resolution and the text of result codes.
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "driver.h"
#include "simcuda.h"

namespace simcuda::drv {
namespace {

std::atomic<bool> g_initialized{false};

struct Context {
  int device;
};

Context* contexts() {
  static Context* all = [] {
    auto* c = new Context[kMaxDeviceCount];
    for (int d = 0; d < kMaxDeviceCount; ++d) c[d].device = d;
    return c;
  }();
  return all;
}

// The thread's context stack (cuCtxPushCurrent, cuCtxPopCurrent; cuCtxSetCurrent replaces its
// top), once the thread has set a context itself; until then the runtime's primary context counts.
thread_local std::vector<CUcontext> t_stack;
thread_local bool t_context_set = false;

// Contexts made by cuCtxCreate. Never freed: a handle another thread still holds must stay safe to
// look up; a destroyed one is only marked so.
struct Created {
  std::mutex mu;
  std::unordered_map<const void*, std::unique_ptr<Context>> contexts;
  std::unordered_map<const void*, bool> alive;
};

Created& created() {
  static Created* c = new Created;
  return *c;
}

// The stack as the thread sees it now: the runtime's context at its bottom if it set none itself.
std::vector<CUcontext>& own_stack() {
  if (!t_context_set) {
    t_stack.clear();
    if (CUcontext adopted = current_context()) t_stack.push_back(adopted);
    t_context_set = true;
  }
  return t_stack;
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* description;
};

// The real driver's names and descriptions (cuda.h) of the codes a program may meet here.
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find_error(CUresult e) {
  for (const ErrorText& t : kErrors) {
    if (t.code == e) return &t;
  }
  return nullptr;
}

}  // namespace

CUresult from_status(Status s) {
  switch (s) {
    case Status::kOk: return CUDA_SUCCESS;
    case Status::kInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case Status::kInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    case Status::kInvalidHandle: return CUDA_ERROR_INVALID_HANDLE;
    case Status::kOutOfMemory: return CUDA_ERROR_OUT_OF_MEMORY;
    case Status::kNotReady: return CUDA_ERROR_NOT_READY;
    case Status::kAlreadyRegistered: return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    case Status::kNotRegistered: return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  return CUDA_ERROR_UNKNOWN;
}

void mark_initialized() { g_initialized.store(true, std::memory_order_release); }

CUresult check_initialized() {
  return g_initialized.load(std::memory_order_acquire) || runtime_initialized() ? CUDA_SUCCESS
                                                                                : CUDA_ERROR_NOT_INITIALIZED;
}

CUcontext primary_context(int device) {
  return reinterpret_cast<CUcontext>(&contexts()[device]);
}

namespace {

bool is_primary(CUcontext ctx) {
  Context* all = contexts();
  auto* c = reinterpret_cast<Context*>(ctx);
  return c >= all && c < all + config().device_count;
}

}  // namespace

int context_device(CUcontext ctx) {
  if (is_primary(ctx)) return reinterpret_cast<Context*>(ctx)->device;
  Created& c = created();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.alive.find(ctx);
  return it != c.alive.end() && it->second ? c.contexts[ctx]->device : -1;
}

// cuCtxSetCurrent: replaces the top of the stack; null pops it.
void set_current_context(CUcontext ctx) {
  std::vector<CUcontext>& stack = own_stack();
  if (!stack.empty()) stack.pop_back();
  if (ctx != nullptr) stack.push_back(ctx);
}

CUcontext current_context() {
  if (t_context_set) return t_stack.empty() ? nullptr : t_stack.back();
  int device = runtime_context_device();
  return device >= 0 && device < config().device_count ? primary_context(device) : nullptr;
}

void push_context(CUcontext ctx) { own_stack().push_back(ctx); }

CUresult pop_context(CUcontext* out) {
  std::vector<CUcontext>& stack = own_stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (out != nullptr) *out = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

CUcontext create_context(int device) {
  auto context = std::make_unique<Context>(Context{device});
  CUcontext handle = reinterpret_cast<CUcontext>(context.get());
  Created& c = created();
  std::lock_guard<std::mutex> lock(c.mu);
  c.alive[handle] = true;
  c.contexts[handle] = std::move(context);
  return handle;
}

// Popped from the calling thread's stack if current there, as documented; a primary context is the
// device's, not the program's to destroy.
CUresult destroy_context(CUcontext ctx) {
  if (is_primary(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  {
    Created& c = created();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.alive.find(ctx);
    if (it == c.alive.end() || !it->second) return CUDA_ERROR_INVALID_CONTEXT;
    it->second = false;
  }
  if (current_context() == ctx) pop_context(nullptr);
  return CUDA_SUCCESS;
}

CUresult current_device(int* device) {
  if (CUresult e = check_initialized(); e) return e;
  CUcontext ctx = current_context();
  *device = ctx == nullptr ? 0 : context_device(ctx);
  return *device < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult resolve_stream(CUstream stream, DefaultStream flavour, StreamId* out) {
  int device;
  if (CUresult e = current_device(&device); e) return e;
  auto h = reinterpret_cast<uintptr_t>(stream);
  if (h == 0) h = flavour == kLegacy ? handles::kLegacyStream : handles::kPerThreadStream;
  if (h == handles::kLegacyStream) {
    *out = timeline().legacy_stream(device);
    return CUDA_SUCCESS;
  }
  if (h == handles::kPerThreadStream) return from_status(per_thread_stream(device, out));
  return handles::decode_stream(stream, out) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

const char* error_name(CUresult e) {
  const ErrorText* t = find_error(e);
  return t == nullptr ? nullptr : t->name;
}

const char* error_string(CUresult e) {
  const ErrorText* t = find_error(e);
  return t == nullptr ? nullptr : t->description;
}

}  // namespace simcuda::drv
