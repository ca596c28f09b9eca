// The shim as NVTX's tool (preload/nvtx.cpp). Two kinds of NVTX call it here:
//  - a fake NVTX, made by the test, hands InitializeInjectionNvtx2 tables of its own, to check which
//    slots the shim fills for NVTX versions old and new, and what makes it refuse;
//  - NVTX's own header implementation, compiled into this program, finds the shim as a statically
//    linked tool (InitializeInjectionNvtx2_fnptr), so that the program's nvtx* calls take exactly the
//    path they take under `cutrace profile`, through NVTX's real tables.
// The records go into a one-ring session in this process and are read back whole.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "in_process_session.h"
#include "runtime.h"

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

namespace {

namespace abi = cutrace::abi;
namespace preload = cutrace::preload;

constexpr abi::DomainSet kNvtxBit = abi::domain_bit(abi::ApiDomain::kNvtx);

// NVTX's header implementation asks for a static tool through this pointer on its first call, when
// NVTX_INJECTION64_PATH names none.
struct UseShimAsNvtxTool : ::testing::Environment {
  void SetUp() override {
    unsetenv("NVTX_INJECTION64_PATH");
    InitializeInjectionNvtx2_fnptr = &InitializeInjectionNvtx2;
  }
};
const auto* const g_environment = ::testing::AddGlobalTestEnvironment(new UseShimAsNvtxTool);

struct Nvtx {
  abi::NvtxEvent event;
  uint16_t size;
  uint64_t time, range_id, payload, string_id;
  uint32_t domain, category, color;
  bool has_color;
  abi::NvtxPayload payload_type;
  abi::NvtxMessage message_type;
  bool text_cut;
  std::string text;
};

class NvtxTool : public ::testing::Test {
 protected:
  void SetUp() override {
    session_.attach();
    // -t cuda,nvtx
    session_.session()->capture_domains.store(abi::kCudaDomains | kNvtxBit);
  }
  void TearDown() override { session_.detach(); }

  // Every NVTX record written since the last call; any other kind fails the test.
  std::vector<Nvtx> drain() {
    std::vector<Nvtx> out;
    session_.drain([&](const uint8_t* p, uint32_t) {
      abi::NvtxRecord r;
      std::memcpy(&r, p, sizeof r);
      EXPECT_EQ(r.header.kind, uint16_t(abi::RecordKind::kNvtx));
      if (r.header.kind != uint16_t(abi::RecordKind::kNvtx)) return;
      EXPECT_EQ(r.header.size, abi::align_record(uint32_t(sizeof r + r.text_bytes)));
      out.push_back({abi::NvtxEvent(r.header.aux), r.header.size, r.time, r.range_id, r.payload, r.string_id,
                     r.domain, r.category, r.color, r.has_color != 0, abi::NvtxPayload(r.payload_type),
                     abi::NvtxMessage(r.message_type), r.text_cut != 0,
                     std::string(reinterpret_cast<const char*>(p + sizeof r), r.text_bytes)});
    });
    return out;
  }

  cutrace::test::InProcessSession session_;
};

nvtxEventAttributes_t attributes() {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return a;
}

// ---- The injection entry point, with a fake NVTX.

void NVTX_API nvtx_own_function() {}
const NvtxFunctionPointer kNvtxOwn = &nvtx_own_function;

// One NVTX instance as a tool sees it: per module, a table of pointers to the slots NVTX calls through
// (entry 0 is null, as in NVTX's globals), each slot first holding a function of NVTX's own. The table
// says how many ids it has; past them, room for more ids holds pointers to slots too, so that a write
// past the table's end shows instead of landing in memory the test does not look at.
class FakeNvtx {
 public:
  static constexpr unsigned kRoom = 64;  // more than any module's ids

  // `known`: the callback ids this NVTX version has per module (NVTX_CBID_*_SIZE in the newest); a
  // module left out is one it does not know.
  explicit FakeNvtx(const std::map<NvtxCallbackModule, unsigned>& known) {
    for (const auto& [module, size] : known) {
      Module& m = modules_[module];
      m.size = size;
      m.slots.assign(kRoom, kNvtxOwn);
      m.table.assign(kRoom, nullptr);
      for (unsigned id = 1; id < kRoom; ++id) m.table[id] = &m.slots[id];
    }
    callbacks_.struct_size = sizeof callbacks_;
    callbacks_.GetModuleFunctionTable = &FakeNvtx::module_table;
  }

  int initialize() {
    current_ = this;
    const int result = InitializeInjectionNvtx2(&FakeNvtx::export_table);
    current_ = nullptr;
    return result;
  }

  NvtxFunctionPointer slot(NvtxCallbackModule module, unsigned id) const { return modules_.at(module).slots.at(id); }
  void remove_slot(NvtxCallbackModule module, unsigned id) { modules_.at(module).table.at(id) = nullptr; }
  template <class Fn>
  Fn function(NvtxCallbackModule module, unsigned id) const {
    return reinterpret_cast<Fn>(slot(module, id));
  }

  NvtxExportTableCallbacks callbacks_{};
  std::set<NvtxCallbackModule> asked_;
  bool no_export_table_ = false;

 private:
  struct Module {
    unsigned size = 0;
    std::vector<NvtxFunctionPointer> slots;
    std::vector<NvtxFunctionPointer*> table;
  };

  static const void* NVTX_API export_table(uint32_t id) {
    if (current_->no_export_table_ || id != NVTX_ETID_CALLBACKS) return nullptr;
    return &current_->callbacks_;
  }
  static int NVTX_API module_table(NvtxCallbackModule module, NvtxFunctionTable* out_table, unsigned* out_size) {
    current_->asked_.insert(module);
    auto it = current_->modules_.find(module);
    if (it == current_->modules_.end()) return 0;
    *out_table = it->second.table.data();
    *out_size = it->second.size;
    return 1;
  }

  std::map<NvtxCallbackModule, Module> modules_;
  static inline FakeNvtx* current_ = nullptr;
};

const std::map<NvtxCallbackModule, unsigned> kNewestNvtx = {
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_SIZE},     {NVTX_CB_MODULE_CUDA, NVTX_CBID_CUDA_SIZE},
    {NVTX_CB_MODULE_OPENCL, NVTX_CBID_OPENCL_SIZE}, {NVTX_CB_MODULE_CUDART, NVTX_CBID_CUDART_SIZE},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_SIZE},   {NVTX_CB_MODULE_SYNC, NVTX_CBID_SYNC_SIZE}};

TEST_F(NvtxTool, InjectionFillsTheSlotsOfEveryCallbackTheShimImplementsAndNoOthers) {
  FakeNvtx nvtx(kNewestNvtx);
  ASSERT_EQ(nvtx.initialize(), 1);
  EXPECT_EQ(nvtx.asked_, (std::set<NvtxCallbackModule>{NVTX_CB_MODULE_CORE, NVTX_CB_MODULE_CORE2, NVTX_CB_MODULE_CUDA,
                                                        NVTX_CB_MODULE_CUDART}));
  for (unsigned id = 1; id < NVTX_CBID_CORE_SIZE; ++id) EXPECT_NE(nvtx.slot(NVTX_CB_MODULE_CORE, id), kNvtxOwn) << id;
  for (unsigned id = 1; id < NVTX_CBID_CUDA_SIZE; ++id) EXPECT_NE(nvtx.slot(NVTX_CB_MODULE_CUDA, id), kNvtxOwn) << id;
  for (unsigned id = 1; id < NVTX_CBID_CUDART_SIZE; ++id)
    EXPECT_NE(nvtx.slot(NVTX_CB_MODULE_CUDART, id), kNvtxOwn) << id;
  for (unsigned id = 1; id < NVTX_CBID_CORE2_SIZE; ++id) {
    // NVTX's resource API is not the shim's: those calls stay NVTX's own no-ops.
    const bool resource = id == NVTX_CBID_CORE2_DomainResourceCreate || id == NVTX_CBID_CORE2_DomainResourceDestroy;
    EXPECT_EQ(nvtx.slot(NVTX_CB_MODULE_CORE2, id) == kNvtxOwn, resource) << id;
  }
  for (unsigned id = 1; id < NVTX_CBID_OPENCL_SIZE; ++id) EXPECT_EQ(nvtx.slot(NVTX_CB_MODULE_OPENCL, id), kNvtxOwn);
  for (unsigned id = 1; id < NVTX_CBID_SYNC_SIZE; ++id) EXPECT_EQ(nvtx.slot(NVTX_CB_MODULE_SYNC, id), kNvtxOwn);

  // The slots hold the shim's functions for those ids: a push and a pop through them are recorded as such.
  auto push = nvtx.function<int(NVTX_API*)(const char*)>(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA);
  auto pop = nvtx.function<int(NVTX_API*)()>(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop);
  auto create = nvtx.function<nvtxDomainHandle_t(NVTX_API*)(const char*)>(NVTX_CB_MODULE_CORE2,
                                                                            NVTX_CBID_CORE2_DomainCreateA);
  auto name_stream = nvtx.function<void(NVTX_API*)(cudaStream_t, const char*)>(NVTX_CB_MODULE_CUDART,
                                                                                NVTX_CBID_CUDART_NameCudaStreamA);
  EXPECT_EQ(push("through the table"), 0);
  EXPECT_EQ(pop(), 0);
  const nvtxDomainHandle_t domain = create("table domain");
  name_stream(reinterpret_cast<cudaStream_t>(uintptr_t(0x5100)), "table stream");
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].event, abi::NvtxEvent::kPush);
  EXPECT_EQ(r[0].text, "through the table");
  EXPECT_EQ(r[1].event, abi::NvtxEvent::kPop);
  EXPECT_EQ(r[2].event, abi::NvtxEvent::kDomainCreate);
  EXPECT_EQ(r[2].domain, uint32_t(reinterpret_cast<uintptr_t>(domain)));
  EXPECT_EQ(r[3].event, abi::NvtxEvent::kNameResource);
  EXPECT_EQ(r[3].category, uint32_t(abi::NvtxResource::kCudaStream));
  EXPECT_EQ(r[3].range_id, 0x5100u);
}

TEST_F(NvtxTool, AnOlderNvtxGetsOnlyTheSlotsItHas) {
  // A version that knew only the first eight core callbacks, and whose MarkW slot is missing.
  FakeNvtx nvtx({{NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx + 1}});
  nvtx.remove_slot(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkW);
  ASSERT_EQ(nvtx.initialize(), 1);
  for (unsigned id = 1; id <= NVTX_CBID_CORE_RangePushEx; ++id)
    EXPECT_EQ(nvtx.slot(NVTX_CB_MODULE_CORE, id) == kNvtxOwn, id == NVTX_CBID_CORE_MarkW) << id;
  // The ids past its table are not its: nothing is written there.
  for (unsigned id = NVTX_CBID_CORE_RangePushEx + 1; id < FakeNvtx::kRoom; ++id)
    EXPECT_EQ(nvtx.slot(NVTX_CB_MODULE_CORE, id), kNvtxOwn) << id;
}

TEST_F(NvtxTool, EveryModuleThatInitialisesGetsTheSameFunctions) {
  FakeNvtx first(kNewestNvtx), second(kNewestNvtx);
  ASSERT_EQ(first.initialize(), 1);
  ASSERT_EQ(second.initialize(), 1);
  for (const auto& [module, size] : kNewestNvtx)
    for (unsigned id = 1; id < size; ++id)
      EXPECT_EQ(first.slot(module, id), second.slot(module, id)) << module << " " << id;
}

TEST_F(NvtxTool, InjectionIsRefusedOnlyWhenNvtxOffersNoTables) {
  EXPECT_EQ(InitializeInjectionNvtx2(nullptr), 0);
  FakeNvtx no_table(kNewestNvtx);
  no_table.no_export_table_ = true;
  EXPECT_EQ(no_table.initialize(), 0);
  FakeNvtx short_table(kNewestNvtx);
  short_table.callbacks_.struct_size = sizeof(size_t);
  EXPECT_EQ(short_table.initialize(), 0);
  FakeNvtx no_function(kNewestNvtx);
  no_function.callbacks_.GetModuleFunctionTable = nullptr;
  EXPECT_EQ(no_function.initialize(), 0);
  for (const FakeNvtx* refused : {&no_table, &short_table, &no_function})
    EXPECT_EQ(refused->slot(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA), kNvtxOwn);
  // Returning 0 would switch NVTX off for the module; one that lacks some modules keeps the rest.
  FakeNvtx core_only({{NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_SIZE}});
  EXPECT_EQ(core_only.initialize(), 1);
  EXPECT_NE(core_only.slot(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA), kNvtxOwn);
}

// ---- The program's calls, through NVTX's own implementation.

TEST_F(NvtxTool, PushesAndPopsNestPerThreadAndAnUnmatchedPopIsRecordedToo) {
  const uint64_t before = preload::monotonic_ns();
  EXPECT_EQ(nvtxRangePushA("outer"), 0);
  EXPECT_EQ(nvtxRangePushA("inner"), 1);
  EXPECT_EQ(nvtxRangePop(), 1);
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_EQ(nvtxRangePop(), -1);
  const uint64_t after = preload::monotonic_ns();
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 5u);
  const abi::NvtxEvent expected[] = {abi::NvtxEvent::kPush, abi::NvtxEvent::kPush, abi::NvtxEvent::kPop,
                                     abi::NvtxEvent::kPop, abi::NvtxEvent::kPop};
  uint64_t last = before;
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].event, expected[i]) << i;
    EXPECT_EQ(r[i].domain, 0u);
    EXPECT_LE(last, r[i].time) << i;
    last = r[i].time;
  }
  EXPECT_LE(last, after);
  EXPECT_EQ(r[0].message_type, abi::NvtxMessage::kText);
  EXPECT_EQ(r[0].text, "outer");
  EXPECT_EQ(r[0].size, 72u);  // 64 + "outer", rounded up to 8
  EXPECT_EQ(r[1].text, "inner");
  EXPECT_EQ(r[2].message_type, abi::NvtxMessage::kNone);
  EXPECT_EQ(r[2].text, "");
  EXPECT_EQ(r[2].size, 64u);
}

TEST_F(NvtxTool, ThreadRangesNestPerDomain) {
  const nvtxDomainHandle_t d = nvtxDomainCreateA("nesting");
  nvtxEventAttributes_t a = attributes();
  EXPECT_EQ(nvtxRangePushA("default"), 0);
  EXPECT_EQ(nvtxDomainRangePushEx(d, &a), 0);
  EXPECT_EQ(nvtxDomainRangePushEx(d, &a), 1);
  EXPECT_EQ(nvtxDomainRangePop(d), 1);
  EXPECT_EQ(nvtxDomainRangePop(d), 0);
  EXPECT_EQ(nvtxDomainRangePop(d), -1);
  EXPECT_EQ(nvtxRangePop(), 0);
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 8u);
  const uint32_t id = uint32_t(reinterpret_cast<uintptr_t>(d));
  EXPECT_EQ(r[0].event, abi::NvtxEvent::kDomainCreate);
  const uint32_t domains[] = {id, 0, id, id, id, id, id, 0};
  for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i].domain, domains[i]) << i;
  EXPECT_EQ(r[7].event, abi::NvtxEvent::kPop);
}

TEST_F(NvtxTool, AttributesCarryColorCategoryPayloadAndMessage) {
  const nvtxStringHandle_t registered = nvtxDomainRegisterStringA(nullptr, "a registered message");
  nvtxEventAttributes_t a = attributes();
  a.category = 7;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff00ff80;
  a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
  a.payload.dValue = 2.5;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "with attributes";
  nvtxMarkEx(&a);

  // A 32-bit payload is the low half; whatever the caller left in the rest of the union is not.
  a = attributes();
  a.payload.ullValue = 0xdeadbeef00000000ull;
  a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
  a.payload.iValue = -2;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = registered;
  EXPECT_EQ(nvtxRangePushEx(&a), 0);
  EXPECT_EQ(nvtxRangePop(), 0);

  a = attributes();
  a.colorType = NVTX_COLOR_UNKNOWN;
  a.color = 0x12345678;
  a.payloadType = NVTX_PAYLOAD_TYPE_FLOAT;
  a.payload.fValue = 1.5f;
  a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  a.message.unicode = L"\u00e9t\u00e9 \u20ac \U0001F600";
  const nvtxRangeId_t id = nvtxRangeStartEx(&a);
  nvtxRangeEnd(id);

  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].event, abi::NvtxEvent::kRegisterString);
  const Nvtx& mark = r[1];
  EXPECT_EQ(mark.event, abi::NvtxEvent::kMark);
  EXPECT_EQ(mark.category, 7u);
  EXPECT_TRUE(mark.has_color);
  EXPECT_EQ(mark.color, 0xff00ff80u);
  EXPECT_EQ(mark.payload_type, abi::NvtxPayload::kDouble);
  double payload;
  std::memcpy(&payload, &mark.payload, sizeof payload);
  EXPECT_EQ(payload, 2.5);
  EXPECT_EQ(mark.message_type, abi::NvtxMessage::kText);
  EXPECT_EQ(mark.text, "with attributes");

  const Nvtx& push = r[2];
  EXPECT_EQ(push.event, abi::NvtxEvent::kPush);
  EXPECT_EQ(push.category, 0u);
  EXPECT_FALSE(push.has_color);
  EXPECT_EQ(push.payload_type, abi::NvtxPayload::kSigned32);
  EXPECT_EQ(push.payload, 0xfffffffeu);
  EXPECT_EQ(push.message_type, abi::NvtxMessage::kRegistered);
  EXPECT_EQ(push.string_id, reinterpret_cast<uintptr_t>(registered));
  EXPECT_EQ(push.string_id, r[0].string_id);
  EXPECT_EQ(push.text, "");
  EXPECT_EQ(r[3].event, abi::NvtxEvent::kPop);

  const Nvtx& start = r[4];
  EXPECT_EQ(start.event, abi::NvtxEvent::kStart);
  EXPECT_EQ(start.range_id, id);
  // A color whose type is not ARGB is no color.
  EXPECT_FALSE(start.has_color);
  EXPECT_EQ(start.color, 0u);
  EXPECT_EQ(start.payload_type, abi::NvtxPayload::kFloat);
  float f;
  const uint32_t low = uint32_t(start.payload);
  std::memcpy(&f, &low, sizeof f);
  EXPECT_EQ(f, 1.5f);
  EXPECT_EQ(start.payload >> 32, 0u);
  EXPECT_EQ(start.message_type, abi::NvtxMessage::kText);
  EXPECT_EQ(start.text, "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // UTF-8 of the wide message
  EXPECT_FALSE(start.text_cut);
  EXPECT_EQ(r[5].event, abi::NvtxEvent::kEnd);
  EXPECT_EQ(r[5].range_id, id);
}

TEST_F(NvtxTool, AnOlderAttributesStructIsReadOnlyAsFarAsItsSize) {
  // The struct of a caller built against an NVTX whose attributes ended before the payload: the fields
  // past its `size` are whatever lies in memory there, never read.
  nvtxEventAttributes_t a = attributes();
  a.size = offsetof(nvtxEventAttributes_t, payloadType);
  a.category = 3;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff112233;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = 99;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "beyond the struct";
  nvtxMarkEx(&a);
  // One that ends before its message.
  a.size = offsetof(nvtxEventAttributes_t, messageType);
  nvtxMarkEx(&a);
  nvtxMarkEx(nullptr);
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].category, 3u);
  EXPECT_TRUE(r[0].has_color);
  EXPECT_EQ(r[0].color, 0xff112233u);
  EXPECT_EQ(r[0].payload_type, abi::NvtxPayload::kNone);
  EXPECT_EQ(r[0].payload, 0u);
  EXPECT_EQ(r[0].message_type, abi::NvtxMessage::kNone);
  EXPECT_EQ(r[0].text, "");
  EXPECT_EQ(r[1].payload_type, abi::NvtxPayload::kUnsigned64);
  EXPECT_EQ(r[1].payload, 99u);
  EXPECT_EQ(r[1].message_type, abi::NvtxMessage::kNone);
  EXPECT_EQ(r[2].event, abi::NvtxEvent::kMark);
  EXPECT_EQ(r[2].category, 0u);
  EXPECT_EQ(r[2].message_type, abi::NvtxMessage::kNone);
}

TEST_F(NvtxTool, ProcessRangesHaveIdsOfTheirOwnInEveryDomain) {
  const nvtxDomainHandle_t d = nvtxDomainCreateA("ranges");
  nvtxEventAttributes_t a = attributes();
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "in a domain";
  const nvtxRangeId_t first = nvtxRangeStartA("first");
  const nvtxRangeId_t second = nvtxDomainRangeStartEx(d, &a);
  const nvtxRangeId_t third = nvtxRangeStartW(L"third");
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  // Ranges may end in any order.
  nvtxRangeEnd(first);
  nvtxRangeEnd(third);
  nvtxDomainRangeEnd(d, second);
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 7u);
  const uint32_t domain = uint32_t(reinterpret_cast<uintptr_t>(d));
  struct Expected {
    abi::NvtxEvent event;
    uint64_t range_id;
    uint32_t domain;
    const char* text;
  } expected[] = {{abi::NvtxEvent::kStart, first, 0, "first"}, {abi::NvtxEvent::kStart, second, domain, "in a domain"},
                  {abi::NvtxEvent::kStart, third, 0, "third"}, {abi::NvtxEvent::kEnd, first, 0, ""},
                  {abi::NvtxEvent::kEnd, third, 0, ""},        {abi::NvtxEvent::kEnd, second, domain, ""}};
  for (size_t i = 0; i < 6; ++i) {
    const Nvtx& got = r[i + 1];
    EXPECT_EQ(got.event, expected[i].event) << i;
    EXPECT_EQ(got.range_id, expected[i].range_id) << i;
    EXPECT_EQ(got.domain, expected[i].domain) << i;
    EXPECT_EQ(got.text, expected[i].text) << i;
  }
}

TEST_F(NvtxTool, MarksInEveryFormAndTextTooLongIsCutAndFlagged) {
  const std::string exact(abi::kMaxNvtxTextBytes, 'x');
  const std::string longer(abi::kMaxNvtxTextBytes + 300, 'y');
  const std::wstring wide_longer(abi::kMaxNvtxTextBytes + 1, L'z');
  nvtxMarkA("plain");
  nvtxMarkW(L"\u00b5s");
  nvtxMarkA(nullptr);
  nvtxMarkA(exact.c_str());
  nvtxMarkA(longer.c_str());
  nvtxMarkW(wide_longer.c_str());
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 6u);
  for (const Nvtx& m : r) EXPECT_EQ(m.event, abi::NvtxEvent::kMark);
  EXPECT_EQ(r[0].text, "plain");
  EXPECT_EQ(r[1].text, "\xc2\xb5s");
  EXPECT_EQ(r[1].message_type, abi::NvtxMessage::kText);
  EXPECT_EQ(r[2].message_type, abi::NvtxMessage::kNone);
  EXPECT_EQ(r[3].text, exact);
  EXPECT_FALSE(r[3].text_cut);
  EXPECT_EQ(r[4].text, longer.substr(0, abi::kMaxNvtxTextBytes));
  EXPECT_TRUE(r[4].text_cut);
  EXPECT_EQ(r[4].size, sizeof(abi::NvtxRecord) + abi::kMaxNvtxTextBytes);
  EXPECT_EQ(r[5].text, std::string(abi::kMaxNvtxTextBytes, 'z'));
  EXPECT_TRUE(r[5].text_cut);
}

// A wide message is cut between characters, so the text kept is valid UTF-8, and a null one is no
// message, as with the A variants.
TEST_F(NvtxTool, WideTextIsCutBetweenCharactersAndANullWideMessageIsNone) {
  // 1,023 ASCII bytes, then a two-byte character that does not fit whole.
  const std::wstring straddling = std::wstring(abi::kMaxNvtxTextBytes - 1, L'a') + L"\u00e9tail";
  // Euro signs (three bytes each): 341 fit in 1,024 bytes, the 342nd does not.
  const std::wstring euros(400, L'\u20ac');
  nvtxMarkW(straddling.c_str());
  nvtxMarkW(euros.c_str());
  nvtxRangePushW(nullptr);
  nvtxRangePop();
  nvtxMarkW(nullptr);
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].text, std::string(abi::kMaxNvtxTextBytes - 1, 'a'));
  EXPECT_TRUE(r[0].text_cut);
  std::string kept;
  for (int i = 0; i < 341; ++i) kept += "\xe2\x82\xac";
  EXPECT_EQ(r[1].text, kept);
  EXPECT_TRUE(r[1].text_cut);
  EXPECT_EQ(r[2].event, abi::NvtxEvent::kPush);
  EXPECT_EQ(r[2].message_type, abi::NvtxMessage::kNone);
  EXPECT_EQ(r[2].text, "");
  EXPECT_EQ(r[4].event, abi::NvtxEvent::kMark);
  EXPECT_EQ(r[4].message_type, abi::NvtxMessage::kNone);
}

TEST_F(NvtxTool, DomainsAndRegisteredStringsAreInternedProcessWide) {
  const nvtxDomainHandle_t alpha = nvtxDomainCreateA("alpha");
  const nvtxDomainHandle_t beta = nvtxDomainCreateW(L"beta");
  const nvtxDomainHandle_t alpha_again = nvtxDomainCreateW(L"alpha");
  EXPECT_EQ(alpha, alpha_again);
  EXPECT_NE(alpha, beta);
  EXPECT_NE(alpha, nullptr);  // 0 is the default domain
  EXPECT_NE(beta, nullptr);
  const nvtxStringHandle_t s = nvtxDomainRegisterStringA(alpha, "step");
  const nvtxStringHandle_t s_again = nvtxDomainRegisterStringW(alpha, L"step");
  const nvtxStringHandle_t s_beta = nvtxDomainRegisterStringA(beta, "step");
  EXPECT_EQ(s, s_again);
  EXPECT_NE(s, s_beta);
  EXPECT_NE(s, nullptr);
  EXPECT_EQ(nvtxDomainCreateA(nullptr), nullptr);
  EXPECT_EQ(nvtxDomainRegisterStringA(alpha, nullptr), nullptr);
  nvtxDomainDestroy(alpha);
  // A destroyed domain's id stays its name's: records already written refer to it.
  EXPECT_EQ(nvtxDomainCreateA("alpha"), alpha);

  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 7u);
  const uint32_t a = uint32_t(reinterpret_cast<uintptr_t>(alpha)), b = uint32_t(reinterpret_cast<uintptr_t>(beta));
  // Each creation and registration is recorded, the repeated ones too: a module's first may come on a
  // thread whose records outlive the others'.
  const struct {
    abi::NvtxEvent event;
    uint32_t domain;
    uint64_t string_id;
    const char* text;
  } expected[] = {{abi::NvtxEvent::kDomainCreate, a, 0, "alpha"},
                  {abi::NvtxEvent::kDomainCreate, b, 0, "beta"},
                  {abi::NvtxEvent::kDomainCreate, a, 0, "alpha"},
                  {abi::NvtxEvent::kRegisterString, a, reinterpret_cast<uintptr_t>(s), "step"},
                  {abi::NvtxEvent::kRegisterString, a, reinterpret_cast<uintptr_t>(s), "step"},
                  {abi::NvtxEvent::kRegisterString, b, reinterpret_cast<uintptr_t>(s_beta), "step"},
                  {abi::NvtxEvent::kDomainCreate, a, 0, "alpha"}};
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].event, expected[i].event) << i;
    EXPECT_EQ(r[i].domain, expected[i].domain) << i;
    EXPECT_EQ(r[i].string_id, expected[i].string_id) << i;
    EXPECT_EQ(r[i].message_type, abi::NvtxMessage::kText) << i;
    EXPECT_EQ(r[i].text, expected[i].text) << i;
  }
}

// Names longer than a record holds are interned whole, so two that share their first
// kMaxNvtxTextBytes stay two, and their records say that the text was cut.
TEST_F(NvtxTool, LongNamesStayDistinctAndTheirRecordsSayTheyWereCut) {
  const std::string common(abi::kMaxNvtxTextBytes + 76, 'n');
  const nvtxDomainHandle_t a = nvtxDomainCreateA((common + "A").c_str());
  const nvtxDomainHandle_t b = nvtxDomainCreateA((common + "B").c_str());
  EXPECT_NE(a, b);
  const nvtxStringHandle_t one = nvtxDomainRegisterStringA(nullptr, (common + "1").c_str());
  const nvtxStringHandle_t two = nvtxDomainRegisterStringA(nullptr, (common + "2").c_str());
  EXPECT_NE(one, two);
  nvtxNameCategoryA(7, (common + "c").c_str());
  const std::vector<Nvtx> records = drain();
  ASSERT_EQ(records.size(), 5u);
  for (const Nvtx& r : records) {
    EXPECT_EQ(r.text, common.substr(0, abi::kMaxNvtxTextBytes));
    EXPECT_TRUE(r.text_cut);
  }
  // At the limit exactly, nothing is cut.
  nvtxDomainCreateA(common.substr(0, abi::kMaxNvtxTextBytes).c_str());
  const std::vector<Nvtx> exact = drain();
  ASSERT_EQ(exact.size(), 1u);
  EXPECT_FALSE(exact[0].text_cut);
}

TEST_F(NvtxTool, NamesAreRecordedWhileCaptureIsOffAndRangesAreNot) {
  session_.session()->capture_domains.store(0);
  const nvtxDomainHandle_t d = nvtxDomainCreateA("named while off");
  nvtxNameCategoryA(4, "io");
  nvtxDomainNameCategoryW(d, 5, L"compute");
  const uint32_t tid = uint32_t(syscall(SYS_gettid));
  nvtxNameOsThreadA(tid, "main thread");
  nvtxNameCuStreamA(reinterpret_cast<CUstream>(uintptr_t(0xc0ffee)), "copy stream");
  nvtxNameCudaDeviceW(-1, L"all devices");
  nvtxNameCudaEventA(reinterpret_cast<cudaEvent_t>(uintptr_t(0xe7e7)), "done");
  // Off: not recorded, but NVTX's answers still count the levels.
  EXPECT_EQ(nvtxRangePushA("not recorded"), 0);
  nvtxMarkA("not recorded");
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_EQ(nvtxRangePop(), -1);
  std::vector<Nvtx> r = drain();
  ASSERT_EQ(r.size(), 7u);
  const uint32_t domain = uint32_t(reinterpret_cast<uintptr_t>(d));
  EXPECT_EQ(r[0].event, abi::NvtxEvent::kDomainCreate);
  EXPECT_EQ(r[1].event, abi::NvtxEvent::kNameCategory);
  EXPECT_EQ(r[1].domain, 0u);
  EXPECT_EQ(r[1].category, 4u);
  EXPECT_EQ(r[1].text, "io");
  EXPECT_EQ(r[2].event, abi::NvtxEvent::kNameCategory);
  EXPECT_EQ(r[2].domain, domain);
  EXPECT_EQ(r[2].category, 5u);
  EXPECT_EQ(r[2].text, "compute");
  EXPECT_EQ(r[3].event, abi::NvtxEvent::kNameThread);
  EXPECT_EQ(r[3].range_id, tid);
  EXPECT_EQ(r[3].text, "main thread");
  EXPECT_EQ(r[4].event, abi::NvtxEvent::kNameResource);
  EXPECT_EQ(r[4].category, uint32_t(abi::NvtxResource::kCuStream));
  EXPECT_EQ(r[4].range_id, 0xc0ffeeu);
  EXPECT_EQ(r[4].text, "copy stream");
  EXPECT_EQ(r[5].event, abi::NvtxEvent::kNameResource);
  EXPECT_EQ(r[5].category, uint32_t(abi::NvtxResource::kCudaDevice));
  EXPECT_EQ(r[5].range_id, 0xffffffffu);  // the int's own four bytes, nothing of the slot's rest
  EXPECT_EQ(r[5].text, "all devices");
  EXPECT_EQ(r[6].event, abi::NvtxEvent::kNameResource);
  EXPECT_EQ(r[6].category, uint32_t(abi::NvtxResource::kCudaEvent));
  EXPECT_EQ(r[6].range_id, 0xe7e7u);
  EXPECT_EQ(r[6].text, "done");
}

TEST_F(NvtxTool, NothingIsRecordedWhileTheTracerItselfRuns) {
  // NVTX calls made from inside the tracer (a library the shim calls annotating itself) are not the
  // program's.
  ++preload::t_thread.in_tracer;
  nvtxDomainCreateA("tracer's own");
  nvtxNameCategoryA(1, "tracer's own");
  nvtxMarkA("tracer's own");
  EXPECT_EQ(nvtxRangePushA("tracer's own"), 0);
  EXPECT_EQ(nvtxRangePop(), 0);
  --preload::t_thread.in_tracer;
  EXPECT_TRUE(drain().empty());
}

}  // namespace
