// The NVTX tool. NVTX v3 is header-only: every module that uses it calls through its own table of
// function pointers, and on its first call loads the library named by NVTX_INJECTION64_PATH (the
// launcher points it at this shim, which is already loaded, so dlopen hands back the same object) and
// calls InitializeInjectionNvtx2 with a way to reach that table. Here the table's slots are pointed
// at the functions below. This runs once per module, so everything lives in process-wide state and a
// second initialisation installs the same functions again.
//
// Ranges and marks are recorded while the nvtx domain is captured. The records that name things
// (domains, registered strings, categories, threads, CUDA objects) are recorded whenever the thread
// has a ring, because events recorded later refer to them.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <cwchar>
#include <mutex>
#include <string>
#include <unordered_map>

#include "capture.h"
#include "runtime.h"

namespace cutrace::preload {
namespace {

constexpr abi::DomainSet kNvtxDomain = abi::domain_bit(abi::ApiDomain::kNvtx);

// What one NVTX event says, before it becomes a record.
struct Annotation {
  abi::NvtxEvent event;
  uint32_t domain = 0;
  uint64_t range_id = 0;
  uint64_t string_id = 0;
  uint32_t category = 0;
  uint32_t color = 0;
  bool has_color = false;
  abi::NvtxPayload payload_type = abi::NvtxPayload::kNone;
  uint64_t payload = 0;
  abi::NvtxMessage message_type = abi::NvtxMessage::kNone;
  const char* text = nullptr;  // UTF-8
  size_t text_bytes = 0;
  bool text_cut = false;  // the program's text was longer than `text` holds
  // After the text: an extended payload (payload_type kExtension, `payload` its schema id), or the
  // values of a payload registration. Read up to kMaxNvtxPayloadBytes of it.
  const void* bytes = nullptr;
  size_t byte_count = 0;
  uint8_t payload_cut = 0;  // abi::kNvtxPayloadCut*
};

// A wide message converted to UTF-8 (the W variants); cut at kMaxNvtxTextBytes like any text, but
// only between characters, so that the text kept is valid UTF-8.
class Utf8 {
 public:
  explicit Utf8(const wchar_t* w) : present_(w != nullptr) {
    if (!w) return;
    for (; *w; ++w) {
      const uint32_t c = uint32_t(*w);
      if (c >= 0x110000) continue;  // not a code point: left out
      const size_t length = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      if (size_ + length > sizeof buf_) break;
      if (length == 1) {
        buf_[size_++] = char(c);
      } else if (length == 2) {
        buf_[size_++] = char(0xc0 | c >> 6);
        buf_[size_++] = char(0x80 | (c & 0x3f));
      } else if (length == 3) {
        buf_[size_++] = char(0xe0 | c >> 12);
        buf_[size_++] = char(0x80 | (c >> 6 & 0x3f));
        buf_[size_++] = char(0x80 | (c & 0x3f));
      } else {
        buf_[size_++] = char(0xf0 | c >> 18);
        buf_[size_++] = char(0x80 | (c >> 12 & 0x3f));
        buf_[size_++] = char(0x80 | (c >> 6 & 0x3f));
        buf_[size_++] = char(0x80 | (c & 0x3f));
      }
    }
    cut_ = *w != 0;
  }
  // False for a null message, which the A variants record as no message at all.
  bool present() const { return present_; }
  const char* data() const { return buf_; }
  size_t size() const { return size_; }
  bool cut() const { return cut_; }

 private:
  char buf_[abi::kMaxNvtxTextBytes];
  size_t size_ = 0;
  bool present_ = false;
  bool cut_ = false;
};

void emit(ThreadState& ts, const Annotation& a) {
  bool cut = a.text_cut;
  size_t length = a.text ? a.text_bytes : 0;
  if (length > abi::kMaxNvtxTextBytes) {
    length = abi::kMaxNvtxTextBytes;
    cut = true;
  }
  uint8_t payload_cut = a.payload_cut;
  size_t payload_bytes = a.bytes ? a.byte_count : 0;
  if (payload_bytes > abi::kMaxNvtxPayloadBytes) {
    payload_bytes = abi::kMaxNvtxPayloadBytes;
    payload_cut |= abi::kNvtxPayloadCutBytes;
  }
  const uint32_t bytes = abi::align_record(uint32_t(sizeof(abi::NvtxRecord) + length + payload_bytes));
  WritingRecord writing(ts);
  uint8_t* p = ts.producer.reserve(bytes);
  if (!p) return;
  auto* r = reinterpret_cast<abi::NvtxRecord*>(p);
  r->header = {uint16_t(abi::RecordKind::kNvtx), uint16_t(bytes), uint32_t(a.event)};
  r->time = now();
  r->range_id = a.range_id;
  r->payload = a.payload;
  r->string_id = a.string_id;
  r->domain = a.domain;
  r->category = a.category;
  r->color = a.color;
  r->text_bytes = uint32_t(length);
  r->has_color = a.has_color;
  r->payload_type = uint8_t(a.payload_type);
  r->message_type = uint8_t(a.message_type);
  r->text_cut = cut;
  r->payload_bytes = uint16_t(payload_bytes);
  r->payload_cut = payload_cut;
  r->reserved = 0;
  if (length) std::memcpy(r->text, a.text, length);
  if (payload_bytes) std::memcpy(r->text + length, a.bytes, payload_bytes);
  // Zero the alignment tail so no stale ring bytes reach the trace.
  const size_t used = length + payload_bytes;
  std::memset(r->text + used, 0, bytes - sizeof(abi::NvtxRecord) - used);
  ts.producer.commit(bytes);
}

// Whether range events and marks need looking at now: nvtx is captured for this process, or -c nvtx
// is in use (every push and start is then checked for the capture range). When not, an NVTX call
// costs this test and NVTX's return-value bookkeeping; no message is even measured.
inline bool nvtx_active() {
  return nvtx_capture_enabled() || should_record(t_thread, kNvtxDomain);
}

// A range or mark: recorded while nvtx is captured.
void record_event(const Annotation& a) {
  ThreadState& ts = t_thread;
  const int saved_errno = errno;
  if (should_record(ts, kNvtxDomain)) emit(ts, a);
  errno = saved_errno;
}

// A naming record: recorded whenever the thread has (or can get) a ring.
void record_name(const Annotation& a) {
  ThreadState& ts = t_thread;
  const int saved_errno = errno;
  if (!ts.in_tracer && (ts.producer.header || prepare_thread(ts))) emit(ts, a);
  errno = saved_errno;
}

// Domains and registered strings are process-wide and interned: the same name gives the same handle
// in every module (each module initialises NVTX separately), and ids stay small. Handles are the
// ids themselves, never 0 (the default domain is 0).
struct Names {
  std::mutex lock;
  std::unordered_map<std::string, uint32_t> domains;
  std::unordered_map<std::string, uint64_t> strings;  // key: domain id (4 bytes) + text
  uint32_t next_domain = 1;
  uint64_t next_string = 1;
};
Names& names() {
  static Names* n = new Names;  // never destroyed: modules may annotate during exit
  return *n;
}

std::atomic<uint64_t> g_next_range_id{1};

// Thread ranges nest per thread and per domain; push returns the level it opened and pop the level
// it closed (NVTX's return values). Domains past the table share its last entry.
constexpr uint32_t kTrackedDomains = 64;
thread_local uint32_t t_push_depth[kTrackedDomains] __attribute__((tls_model("initial-exec")));

uint32_t& push_depth(uint32_t domain) { return t_push_depth[domain < kTrackedDomains ? domain : kTrackedDomains - 1]; }

uint32_t domain_id(nvtxDomainHandle_t d) { return uint32_t(reinterpret_cast<uintptr_t>(d)); }

// An extended payload: the first of `count` nvtxPayloadData_t is kept (its bytes up to
// kMaxNvtxPayloadBytes, read by emit); the others are flagged as left out.
void set_extended_payload(Annotation& a, const nvtxPayloadData_t* data, size_t count) {
  if (!data || count == 0) return;
  a.payload_type = abi::NvtxPayload::kExtension;
  a.payload = data->schemaId;
  a.bytes = data->payload;
  a.byte_count = data->payload ? data->size : 0;
  if (!data->payload && data->size) a.payload_cut |= abi::kNvtxPayloadCutBytes;
  if (count > 1) a.payload_cut |= abi::kNvtxPayloadCutMore;
}

// Reads the fields of an nvtxEventAttributes_t the caller's version has (its `size` says which).
Annotation from_attributes(abi::NvtxEvent event, uint32_t domain, const nvtxEventAttributes_t* attr) {
  Annotation a;
  a.event = event;
  a.domain = domain;
  if (!attr) return a;
  const size_t size = attr->size;
  auto has = [size](size_t offset, size_t bytes) { return offset + bytes <= size; };
  if (has(offsetof(nvtxEventAttributes_t, category), 4)) a.category = attr->category;
  if (has(offsetof(nvtxEventAttributes_t, color), 4) && attr->colorType == NVTX_COLOR_ARGB) {
    a.color = attr->color;
    a.has_color = true;
  }
  if (has(offsetof(nvtxEventAttributes_t, payload), 8) && attr->payloadType > 0 && attr->payloadType <= 6) {
    a.payload_type = abi::NvtxPayload(attr->payloadType);
    std::memcpy(&a.payload, &attr->payload, sizeof a.payload);
    // 32-bit payloads occupy the low half; the rest of the union is whatever the caller left there.
    if (attr->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT32) a.payload &= 0xffffffffu;
  }
  if (has(offsetof(nvtxEventAttributes_t, payload), 8) && attr->payloadType == NVTX_PAYLOAD_TYPE_EXT) {
    // The payload is an array of nvtxPayloadData_t; reserved0 says how many (NVTX's helpers set it).
    const auto* data = reinterpret_cast<const nvtxPayloadData_t*>(uintptr_t(attr->payload.ullValue));
    const int32_t count = has(offsetof(nvtxEventAttributes_t, reserved0), 4) ? attr->reserved0 : 1;
    set_extended_payload(a, data, count > 0 ? size_t(count) : 1);
  }
  if (!has(offsetof(nvtxEventAttributes_t, message), sizeof(void*))) return a;
  switch (attr->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      if (attr->message.ascii) {
        a.message_type = abi::NvtxMessage::kText;
        a.text = attr->message.ascii;
        a.text_bytes = strnlen(a.text, abi::kMaxNvtxTextBytes + 1);
      }
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      a.message_type = abi::NvtxMessage::kRegistered;
      a.string_id = reinterpret_cast<uintptr_t>(attr->message.registered);
      break;
    default:
      break;  // Unicode messages are handled by the caller, which owns the converted text
  }
  return a;
}

// The message of a W variant, converted; `text` must outlive the annotation's use.
void set_text(Annotation& a, const Utf8& text) {
  if (!text.present()) return;
  a.message_type = abi::NvtxMessage::kText;
  a.text = text.data();
  a.text_bytes = text.size();
  a.text_cut = text.cut();
}

// A push or start that opens the capture is recorded inside it.
void open_capture(const Annotation& a) {
  if (!nvtx_capture_enabled()) return;
  if (a.event == abi::NvtxEvent::kPush)
    nvtx_capture_push(a.domain, push_depth(a.domain), a.text, a.text_bytes, a.string_id);
  else if (a.event == abi::NvtxEvent::kStart)
    nvtx_capture_start(a.domain, a.range_id, a.text, a.text_bytes, a.string_id);
}

// Records an event whose attributes may carry a wide message.
void record_with_attributes(abi::NvtxEvent event, uint32_t domain, const nvtxEventAttributes_t* attr,
                            uint64_t range_id = 0) {
  Annotation a = from_attributes(event, domain, attr);
  a.range_id = range_id;
  const bool wide = attr && attr->size >= offsetof(nvtxEventAttributes_t, message) + sizeof(void*) &&
                    attr->messageType == NVTX_MESSAGE_TYPE_UNICODE && attr->message.unicode;
  Utf8 text(wide ? attr->message.unicode : nullptr);
  if (wide) set_text(a, text);
  open_capture(a);
  record_event(a);
}

Annotation text_event(abi::NvtxEvent event, const char* message) {
  Annotation a;
  a.event = event;
  if (message) {
    a.message_type = abi::NvtxMessage::kText;
    a.text = message;
    a.text_bytes = strnlen(message, abi::kMaxNvtxTextBytes + 1);
  }
  return a;
}

// ---- Core: marks and ranges of the default domain.

void NVTX_API MarkEx(const nvtxEventAttributes_t* attr) {
  if (nvtx_active()) record_with_attributes(abi::NvtxEvent::kMark, 0, attr);
}
void NVTX_API MarkA(const char* message) {
  if (nvtx_active()) record_event(text_event(abi::NvtxEvent::kMark, message));
}
void NVTX_API MarkW(const wchar_t* message) {
  if (!nvtx_active()) return;
  Utf8 text(message);
  Annotation a = text_event(abi::NvtxEvent::kMark, nullptr);
  set_text(a, text);
  record_event(a);
}

nvtxRangeId_t start_range(Annotation a) {
  a.range_id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  // A range that opens the capture is itself inside it.
  nvtx_capture_start(a.domain, a.range_id, a.text, a.text_bytes, a.string_id);
  record_event(a);
  return a.range_id;
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* attr) {
  const uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  if (nvtx_active()) record_with_attributes(abi::NvtxEvent::kStart, 0, attr, id);
  return id;
}
nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  if (!nvtx_active()) return g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  return start_range(text_event(abi::NvtxEvent::kStart, message));
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) {
  if (!nvtx_active()) return g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  Utf8 text(message);
  Annotation a = text_event(abi::NvtxEvent::kStart, nullptr);
  set_text(a, text);
  return start_range(a);
}
void end_range(uint32_t domain, nvtxRangeId_t id) {
  if (!nvtx_active()) return;
  Annotation a;
  a.event = abi::NvtxEvent::kEnd;
  a.domain = domain;
  a.range_id = id;
  record_event(a);
  nvtx_capture_end(id);  // after: the end of the capturing range is inside it
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { end_range(0, id); }

int push(uint32_t domain, const Annotation& a) {
  open_capture(a);
  record_event(a);
  return int(push_depth(domain)++);
}
int pop(uint32_t domain) {
  uint32_t& depth = push_depth(domain);
  if (!nvtx_active()) return depth == 0 ? -1 : int(--depth);
  // A pop with nothing open is recorded too (the reports count it as unmatched); NVTX's answer is -1.
  Annotation a;
  a.event = abi::NvtxEvent::kPop;
  a.domain = domain;
  record_event(a);
  if (depth == 0) return -1;
  --depth;
  nvtx_capture_pop(domain, depth);  // after: the pop of the capturing range is inside it
  return int(depth);
}
int NVTX_API RangePushEx(const nvtxEventAttributes_t* attr) {
  if (nvtx_active()) record_with_attributes(abi::NvtxEvent::kPush, 0, attr);
  return int(push_depth(0)++);
}
int NVTX_API RangePushA(const char* message) {
  if (!nvtx_active()) return int(push_depth(0)++);
  return push(0, text_event(abi::NvtxEvent::kPush, message));
}
int NVTX_API RangePushW(const wchar_t* message) {
  if (!nvtx_active()) return int(push_depth(0)++);
  Utf8 text(message);
  Annotation a = text_event(abi::NvtxEvent::kPush, nullptr);
  set_text(a, text);
  return push(0, a);
}
int NVTX_API RangePop() { return pop(0); }

void name_category(uint32_t domain, uint32_t category, const char* text, size_t bytes) {
  Annotation a;
  a.event = abi::NvtxEvent::kNameCategory;
  a.domain = domain;
  a.category = category;
  a.message_type = abi::NvtxMessage::kText;
  a.text = text;
  a.text_bytes = bytes;
  record_name(a);
}
void NVTX_API NameCategoryA(uint32_t category, const char* name) {
  if (name) name_category(0, category, name, strnlen(name, abi::kMaxNvtxTextBytes + 1));
}
void NVTX_API NameCategoryW(uint32_t category, const wchar_t* name) {
  Utf8 text(name);
  if (name) name_category(0, category, text.data(), text.size());
}

void name_thread(uint32_t tid, const char* text, size_t bytes) {
  Annotation a;
  a.event = abi::NvtxEvent::kNameThread;
  a.range_id = tid;
  a.message_type = abi::NvtxMessage::kText;
  a.text = text;
  a.text_bytes = bytes;
  record_name(a);
}
void NVTX_API NameOsThreadA(uint32_t tid, const char* name) {
  if (name) name_thread(tid, name, strnlen(name, abi::kMaxNvtxTextBytes + 1));
}
void NVTX_API NameOsThreadW(uint32_t tid, const wchar_t* name) {
  Utf8 text(name);
  if (name) name_thread(tid, text.data(), text.size());
}

// ---- Core2: domains.

void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* attr) {
  if (nvtx_active()) record_with_attributes(abi::NvtxEvent::kMark, domain_id(d), attr);
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* attr) {
  const uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  if (nvtx_active()) record_with_attributes(abi::NvtxEvent::kStart, domain_id(d), attr, id);
  return id;
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { end_range(domain_id(d), id); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* attr) {
  if (nvtx_active()) record_with_attributes(abi::NvtxEvent::kPush, domain_id(d), attr);
  return int(push_depth(domain_id(d))++);
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) { return pop(domain_id(d)); }
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t category, const char* name) {
  if (name) name_category(domain_id(d), category, name, strnlen(name, abi::kMaxNvtxTextBytes + 1));
}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t category, const wchar_t* name) {
  Utf8 text(name);
  if (name) name_category(domain_id(d), category, text.data(), text.size());
}

nvtxStringHandle_t register_string(uint32_t domain, const char* text, size_t bytes) {
  ThreadState& ts = t_thread;
  ++ts.in_tracer;  // the allocations below are the tracer's own
  std::string key(reinterpret_cast<const char*>(&domain), sizeof domain);
  key.append(text, bytes);
  uint64_t id;
  bool added = false;
  {
    Names& n = names();
    std::lock_guard<std::mutex> guard(n.lock);
    auto [it, inserted] = n.strings.emplace(std::move(key), n.next_string);
    if (inserted) ++n.next_string;
    id = it->second;
    added = inserted;
  }
  --ts.in_tracer;
  // Recorded each time it is registered, not only the first: another module registering the same
  // text may be the first to run on a thread whose records outlive the first's (a forked child).
  (void)added;
  nvtx_capture_string_registered(domain, id, text, bytes);
  Annotation a;
  a.event = abi::NvtxEvent::kRegisterString;
  a.domain = domain;
  a.string_id = id;
  a.message_type = abi::NvtxMessage::kText;
  a.text = text;
  a.text_bytes = bytes;
  record_name(a);
  return reinterpret_cast<nvtxStringHandle_t>(uintptr_t(id));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t d, const char* text) {
  if (!text) return nullptr;
  // Interned by the whole text, so that two long strings that share their first kMaxNvtxTextBytes stay
  // two; the record cuts it and says so.
  return register_string(domain_id(d), text, std::strlen(text));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t* text) {
  if (!text) return nullptr;
  Utf8 utf8(text);
  return register_string(domain_id(d), utf8.data(), utf8.size());
}

nvtxDomainHandle_t create_domain(const char* name, size_t bytes) {
  ThreadState& ts = t_thread;
  ++ts.in_tracer;
  uint32_t id;
  {
    Names& n = names();
    std::lock_guard<std::mutex> guard(n.lock);
    auto [it, inserted] = n.domains.emplace(std::string(name, bytes), n.next_domain);
    if (inserted) ++n.next_domain;
    id = it->second;
  }
  --ts.in_tracer;
  nvtx_capture_domain_created(id, name, bytes);
  Annotation a;
  a.event = abi::NvtxEvent::kDomainCreate;
  a.domain = id;
  a.message_type = abi::NvtxMessage::kText;
  a.text = name;
  a.text_bytes = bytes;
  record_name(a);
  return reinterpret_cast<nvtxDomainHandle_t>(uintptr_t(id));
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  if (!name) return nullptr;
  return create_domain(name, std::strlen(name));  // whole, as register_string's
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  if (!name) return nullptr;
  Utf8 utf8(name);
  return create_domain(utf8.data(), utf8.size());
}
// Domains live as long as the process: their ids name records already written.
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}
void NVTX_API Initialize(const void*) {}

// ---- CUDA and CUDA runtime resource names.

void name_resource(abi::NvtxResource kind, uint64_t handle, const char* text, size_t bytes) {
  Annotation a;
  a.event = abi::NvtxEvent::kNameResource;
  a.category = uint32_t(kind);
  a.range_id = handle;
  a.message_type = abi::NvtxMessage::kText;
  a.text = text;
  a.text_bytes = bytes;
  record_name(a);
}
template <abi::NvtxResource kKind, class Handle>
void NVTX_API NameResourceA(Handle handle, const char* name) {
  uint64_t value = 0;
  std::memcpy(&value, &handle, sizeof handle < sizeof value ? sizeof handle : sizeof value);
  if (name) name_resource(kKind, value, name, strnlen(name, abi::kMaxNvtxTextBytes + 1));
}
template <abi::NvtxResource kKind, class Handle>
void NVTX_API NameResourceW(Handle handle, const wchar_t* name) {
  uint64_t value = 0;
  std::memcpy(&value, &handle, sizeof handle < sizeof value ? sizeof handle : sizeof value);
  Utf8 utf8(name);
  if (name) name_resource(kKind, value, utf8.data(), utf8.size());
}

// ---- The payload extension (nvToolsExtPayload.h): schemas and enums that describe binary payloads,
// and ranges and marks that carry them. Registrations are naming records, so that payloads recorded
// later can be decoded; the program's structures are read only as far as their field masks say.

// Entries kept of one schema or enum; a registration with more is flagged as cut.
constexpr size_t kMaxRegisteredEntries = 256;

// Ids handed to schemas and enums registered without a static id, process-wide as NVTX asks.
std::atomic<uint64_t> g_next_schema_id{NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START};

size_t text_length(const char* text) { return text ? strnlen(text, abi::kMaxNvtxTextBytes + 1) : 0; }

// One registration record: `event` of schema `id` in `domain`, entry `index`, named `name`, its values `info`.
template <class Info>
void record_registration(abi::NvtxEvent event, uint32_t domain, uint64_t id, uint32_t index, const char* name,
                         const Info& info, uint8_t cut) {
  Annotation a;
  a.event = event;
  a.domain = domain;
  a.string_id = id;
  a.category = index;
  if (name) {
    a.message_type = abi::NvtxMessage::kText;
    a.text = name;
    a.text_bytes = text_length(name);
  }
  a.bytes = &info;
  a.byte_count = sizeof info;
  a.payload_cut = cut;
  record_name(a);
}

uint64_t NVTX_API PayloadSchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t* attr) {
  if (!attr) return 0;
  const uint64_t mask = attr->fieldMask;
  auto given = [mask](uint64_t field) { return (mask & field) != 0; };
  uint64_t id = given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID) ? attr->schemaId : 0;
  if (id == 0) id = g_next_schema_id.fetch_add(1, std::memory_order_relaxed);
  const nvtxPayloadSchemaEntry_t* entries = given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES) ? attr->entries : nullptr;
  const size_t count = entries && given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) ? attr->numEntries : 0;
  const size_t kept = count < kMaxRegisteredEntries ? count : kMaxRegisteredEntries;
  abi::NvtxSchemaInfo info{};
  info.type = given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE) ? attr->type : NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  info.flags = given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_FLAGS) ? attr->flags : 0;
  info.static_size = given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) ? attr->payloadStaticSize : 0;
  info.entries = count;
  const uint32_t domain = domain_id(d);
  const char* name = given(NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME) ? attr->name : nullptr;
  record_registration(abi::NvtxEvent::kPayloadSchema, domain, id, 0, name, info,
                      kept < count ? abi::kNvtxPayloadCutEntries : 0);
  for (size_t i = 0; i < kept; ++i) {
    const nvtxPayloadSchemaEntry_t& e = entries[i];
    const abi::NvtxSchemaEntry entry{e.type, e.flags, e.offset, e.arrayOrUnionDetail};
    record_registration(abi::NvtxEvent::kPayloadSchemaEntry, domain, id, uint32_t(i), e.name, entry, 0);
  }
  return id;
}

uint64_t NVTX_API PayloadEnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t* attr) {
  if (!attr) return 0;
  const uint64_t mask = attr->fieldMask;
  auto given = [mask](uint64_t field) { return (mask & field) != 0; };
  uint64_t id = given(NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID) ? attr->schemaId : 0;
  if (id == 0) id = g_next_schema_id.fetch_add(1, std::memory_order_relaxed);
  const nvtxPayloadEnum_t* entries = given(NVTX_PAYLOAD_ENUM_ATTR_FIELD_ENTRIES) ? attr->entries : nullptr;
  const size_t count = entries && given(NVTX_PAYLOAD_ENUM_ATTR_FIELD_NUM_ENTRIES) ? attr->numEntries : 0;
  const size_t kept = count < kMaxRegisteredEntries ? count : kMaxRegisteredEntries;
  const abi::NvtxEnumInfo info{given(NVTX_PAYLOAD_ENUM_ATTR_FIELD_SIZE) ? attr->sizeOfEnum : sizeof(int), count};
  const uint32_t domain = domain_id(d);
  record_registration(abi::NvtxEvent::kPayloadEnum, domain, id, 0,
                      given(NVTX_PAYLOAD_ENUM_ATTR_FIELD_NAME) ? attr->name : nullptr, info,
                      kept < count ? abi::kNvtxPayloadCutEntries : 0);
  for (size_t i = 0; i < kept; ++i) {
    const abi::NvtxEnumEntry entry{entries[i].value, uint64_t(entries[i].isFlag != 0)};
    record_registration(abi::NvtxEvent::kPayloadEnumEntry, domain, id, uint32_t(i), entries[i].name, entry, 0);
  }
  return id;
}

Annotation payload_event(abi::NvtxEvent event, nvtxDomainHandle_t d, const nvtxPayloadData_t* data, size_t count) {
  Annotation a;
  a.event = event;
  a.domain = domain_id(d);
  set_extended_payload(a, data, count);
  return a;
}
void NVTX_API MarkPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t* data, size_t count) {
  if (nvtx_active()) record_event(payload_event(abi::NvtxEvent::kMark, d, data, count));
}
int NVTX_API RangePushPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t* data, size_t count) {
  if (!nvtx_active()) return int(push_depth(domain_id(d))++);
  return push(domain_id(d), payload_event(abi::NvtxEvent::kPush, d, data, count));
}
// A payload given at the end of a range is recorded with its pop or end record.
int NVTX_API RangePopPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t* data, size_t count) {
  const uint32_t domain = domain_id(d);
  uint32_t& depth = push_depth(domain);
  if (!nvtx_active()) return depth == 0 ? -1 : int(--depth);
  record_event(payload_event(abi::NvtxEvent::kPop, d, data, count));
  if (depth == 0) return -1;
  --depth;
  nvtx_capture_pop(domain, depth);
  return int(depth);
}
nvtxRangeId_t NVTX_API RangeStartPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t* data, size_t count) {
  if (!nvtx_active()) return g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  return start_range(payload_event(abi::NvtxEvent::kStart, d, data, count));
}
void NVTX_API RangeEndPayload(nvtxDomainHandle_t d, nvtxRangeId_t id, const nvtxPayloadData_t* data, size_t count) {
  if (!nvtx_active()) return;
  Annotation a = payload_event(abi::NvtxEvent::kEnd, d, data, count);
  a.range_id = id;
  record_event(a);
  nvtx_capture_end(id);
}
// Every domain is recorded; what is traced is decided by -t and the capture range.
uint8_t NVTX_API DomainIsEnabled(nvtxDomainHandle_t) { return 1; }

// Points slot `id` of a module's table at `fn`, where the module's NVTX version has that slot.
template <class Fn>
void install(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (table && id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace
}  // namespace cutrace::preload

using namespace cutrace::preload;
using cutrace::abi::NvtxResource;

// Called by the NVTX code of every module that annotates, on its first NVTX call. Returning 0 would
// turn NVTX off for that module, so a module whose tables cannot be had still gets 1 for the rest.
extern "C" CUTRACE_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (!get_export_table) return 0;
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable)
    return 0;
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) {
    install(t, n, NVTX_CBID_CORE_MarkEx, MarkEx);
    install(t, n, NVTX_CBID_CORE_MarkA, MarkA);
    install(t, n, NVTX_CBID_CORE_MarkW, MarkW);
    install(t, n, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
    install(t, n, NVTX_CBID_CORE_RangeStartA, RangeStartA);
    install(t, n, NVTX_CBID_CORE_RangeStartW, RangeStartW);
    install(t, n, NVTX_CBID_CORE_RangeEnd, RangeEnd);
    install(t, n, NVTX_CBID_CORE_RangePushEx, RangePushEx);
    install(t, n, NVTX_CBID_CORE_RangePushA, RangePushA);
    install(t, n, NVTX_CBID_CORE_RangePushW, RangePushW);
    install(t, n, NVTX_CBID_CORE_RangePop, RangePop);
    install(t, n, NVTX_CBID_CORE_NameCategoryA, NameCategoryA);
    install(t, n, NVTX_CBID_CORE_NameCategoryW, NameCategoryW);
    install(t, n, NVTX_CBID_CORE_NameOsThreadA, NameOsThreadA);
    install(t, n, NVTX_CBID_CORE_NameOsThreadW, NameOsThreadW);
  }
  t = nullptr;
  n = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) {
    install(t, n, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
    install(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
    install(t, n, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
    install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
    install(t, n, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
    install(t, n, NVTX_CBID_CORE2_DomainNameCategoryA, DomainNameCategoryA);
    install(t, n, NVTX_CBID_CORE2_DomainNameCategoryW, DomainNameCategoryW);
    install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
    install(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
    install(t, n, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
    install(t, n, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
    install(t, n, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
    install(t, n, NVTX_CBID_CORE2_Initialize, Initialize);
  }
  t = nullptr;
  n = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &t, &n)) {
    install(t, n, NVTX_CBID_CUDA_NameCuDeviceA, NameResourceA<NvtxResource::kCuDevice, CUdevice>);
    install(t, n, NVTX_CBID_CUDA_NameCuDeviceW, NameResourceW<NvtxResource::kCuDevice, CUdevice>);
    install(t, n, NVTX_CBID_CUDA_NameCuContextA, NameResourceA<NvtxResource::kCuContext, CUcontext>);
    install(t, n, NVTX_CBID_CUDA_NameCuContextW, NameResourceW<NvtxResource::kCuContext, CUcontext>);
    install(t, n, NVTX_CBID_CUDA_NameCuStreamA, NameResourceA<NvtxResource::kCuStream, CUstream>);
    install(t, n, NVTX_CBID_CUDA_NameCuStreamW, NameResourceW<NvtxResource::kCuStream, CUstream>);
    install(t, n, NVTX_CBID_CUDA_NameCuEventA, NameResourceA<NvtxResource::kCuEvent, CUevent>);
    install(t, n, NVTX_CBID_CUDA_NameCuEventW, NameResourceW<NvtxResource::kCuEvent, CUevent>);
  }
  t = nullptr;
  n = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CUDART, &t, &n)) {
    install(t, n, NVTX_CBID_CUDART_NameCudaDeviceA, NameResourceA<NvtxResource::kCudaDevice, int>);
    install(t, n, NVTX_CBID_CUDART_NameCudaDeviceW, NameResourceW<NvtxResource::kCudaDevice, int>);
    install(t, n, NVTX_CBID_CUDART_NameCudaStreamA, NameResourceA<NvtxResource::kCudaStream, cudaStream_t>);
    install(t, n, NVTX_CBID_CUDART_NameCudaStreamW, NameResourceW<NvtxResource::kCudaStream, cudaStream_t>);
    install(t, n, NVTX_CBID_CUDART_NameCudaEventA, NameResourceA<NvtxResource::kCudaEvent, cudaEvent_t>);
    install(t, n, NVTX_CBID_CUDART_NameCudaEventW, NameResourceW<NvtxResource::kCudaEvent, cudaEvent_t>);
  }
  return 1;
}


// Called by the NVTX code of a module on its first call into an extension (nvtxExtInit.h). Only the
// payload extension is taken; the slots of the others stay empty, which NVTX turns into no-ops.
extern "C" CUTRACE_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  if (!info || info->moduleId != NVTX_EXT_PAYLOAD_MODULEID || info->segmentsCount < 1 || !info->segments) return 1;
  const nvtxExtModuleSegment_t& segment = info->segments[0];
  intptr_t* slots = segment.functionSlots;
  if (!slots) return 1;
  auto set = [&](size_t id, auto fn) {
    if (id < segment.slotCount) slots[id] = reinterpret_cast<intptr_t>(fn);
  };
  set(NVTX3EXT_CBID_nvtxPayloadSchemaRegister, PayloadSchemaRegister);
  set(NVTX3EXT_CBID_nvtxPayloadEnumRegister, PayloadEnumRegister);
  set(NVTX3EXT_CBID_nvtxMarkPayload, MarkPayload);
  set(NVTX3EXT_CBID_nvtxRangePushPayload, RangePushPayload);
  set(NVTX3EXT_CBID_nvtxRangePopPayload, RangePopPayload);
  set(NVTX3EXT_CBID_nvtxRangeStartPayload, RangeStartPayload);
  set(NVTX3EXT_CBID_nvtxRangeEndPayload, RangeEndPayload);
  set(NVTX3EXT_CBID_nvtxDomainIsEnabled, DomainIsEnabled);
  return 1;
}

// NVTX in a named domain for python/bootstrap/ (--python-functions-trace), which reaches the shim with
// ctypes: the Python of the program need not have an NVTX package, and the shim is the NVTX tool. A
// null or empty name is the default domain. `argb` is the range's colour when `has_color`.
extern "C" CUTRACE_EXPORT void* cutrace_nvtx_domain(const char* name) {
  if (!name || !*name) return nullptr;
  return cutrace::preload::DomainCreateA(name);
}

extern "C" CUTRACE_EXPORT int cutrace_nvtx_push(void* domain, const char* message, uint32_t argb, int has_color) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.colorType = has_color ? NVTX_COLOR_ARGB : NVTX_COLOR_UNKNOWN;
  attr.color = argb;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = message ? message : "";
  return cutrace::preload::DomainRangePushEx(static_cast<nvtxDomainHandle_t>(domain), &attr);
}

extern "C" CUTRACE_EXPORT int cutrace_nvtx_pop(void* domain) {
  return cutrace::preload::DomainRangePop(static_cast<nvtxDomainHandle_t>(domain));
}
