// A stand-in for NCCL's NVTX annotations, for tests that cannot load NCCL (no GPU): the same domain
// ("NCCL"), range names (registered strings named after the API functions), payload schemas (their
// entry names, types and layout) and reduction-operation enum, through the public NVTX payload API as
// NCCL uses it. Each call opens a push/pop range whose extended payload describes it, then closes it.
#include "nccl_like.h"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace {

constexpr uint64_t kStatic = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START;
constexpr uint64_t kCommInitRankSchema = kStatic + 0;
constexpr uint64_t kAllReduceSchema = kStatic + 5;
constexpr uint64_t kBroadcastSchema = kStatic + 6;
constexpr uint64_t kRedOpEnum = kStatic + 11;

struct CommInitRankParams {
  uint64_t comm;
  int nranks;
  int rank;
  int cuda_device;
};
struct AllReduceParams {
  uint64_t comm;
  size_t bytes;
  int op;  // like_red_op
};
struct BroadcastParams {
  uint64_t comm;
  size_t bytes;
  int root;
};

const nvtxPayloadSchemaEntry_t kCommInitRankEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", nullptr, 0, offsetof(CommInitRankParams, comm), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "No. of ranks", nullptr, 0, offsetof(CommInitRankParams, nranks), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "Rank", nullptr, 0, offsetof(CommInitRankParams, rank), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "CUDA device", nullptr, 0, offsetof(CommInitRankParams, cuda_device), nullptr, nullptr},
};
const nvtxPayloadSchemaEntry_t kAllReduceEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", nullptr, 0, offsetof(AllReduceParams, comm), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", nullptr, 0, offsetof(AllReduceParams, bytes), nullptr, nullptr},
    {0, kRedOpEnum, "Reduction operation", nullptr, 0, offsetof(AllReduceParams, op), nullptr, nullptr},
};
const nvtxPayloadSchemaEntry_t kBroadcastEntries[] = {
    {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", nullptr, 0, offsetof(BroadcastParams, comm), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", nullptr, 0, offsetof(BroadcastParams, bytes), nullptr, nullptr},
    {0, NVTX_PAYLOAD_ENTRY_TYPE_INT, "Root", nullptr, 0, offsetof(BroadcastParams, root), nullptr, nullptr},
};
const nvtxPayloadEnum_t kRedOps[] = {
    {"Sum", like_sum, 0}, {"Product", like_prod, 0}, {"Max", like_max, 0}, {"Min", like_min, 0}, {"Avg", like_avg, 0}};

struct Nvtx {
  nvtxDomainHandle_t domain;
  nvtxStringHandle_t comm_init_rank, all_reduce, broadcast;
};

template <size_t N>
void register_schema(nvtxDomainHandle_t domain, const char* name, uint64_t id, const nvtxPayloadSchemaEntry_t (&entries)[N],
                     size_t size) {
  nvtxPayloadSchemaAttr_t attr{};
  attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
  attr.name = name;
  attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  attr.entries = entries;
  attr.numEntries = N;
  attr.payloadStaticSize = size;
  attr.schemaId = id;
  nvtxPayloadSchemaRegister(domain, &attr);
}

// Registered once per process, before the first range, as NCCL registers its enum and schemas.
const Nvtx& nvtx() {
  static const Nvtx n = [] {
    Nvtx v;
    v.domain = nvtxDomainCreateA("NCCL");
    nvtxPayloadEnumAttr_t red{};
    red.fieldMask = NVTX_PAYLOAD_ENUM_ATTR_FIELD_NAME | NVTX_PAYLOAD_ENUM_ATTR_FIELD_ENTRIES |
                    NVTX_PAYLOAD_ENUM_ATTR_FIELD_NUM_ENTRIES | NVTX_PAYLOAD_ENUM_ATTR_FIELD_SIZE |
                    NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID;
    red.name = "ncclRedOp_t";
    red.entries = kRedOps;
    red.numEntries = sizeof kRedOps / sizeof kRedOps[0];
    red.sizeOfEnum = sizeof(int);
    red.schemaId = kRedOpEnum;
    nvtxPayloadEnumRegister(v.domain, &red);
    register_schema(v.domain, "CommInitRank", kCommInitRankSchema, kCommInitRankEntries, sizeof(CommInitRankParams));
    register_schema(v.domain, "AllReduce", kAllReduceSchema, kAllReduceEntries, sizeof(AllReduceParams));
    register_schema(v.domain, "Broadcast", kBroadcastSchema, kBroadcastEntries, sizeof(BroadcastParams));
    v.comm_init_rank = nvtxDomainRegisterStringA(v.domain, "ncclCommInitRank");
    v.all_reduce = nvtxDomainRegisterStringA(v.domain, "ncclAllReduce");
    v.broadcast = nvtxDomainRegisterStringA(v.domain, "ncclBroadcast");
    return v;
  }();
  return n;
}

// Opens the range of `name` with `count` payloads, as NCCL's scoped ranges do.
void push(nvtxStringHandle_t name, const nvtxPayloadData_t* payloads, int count) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = name;
  if (count > 0) {
    attr.payloadType = NVTX_PAYLOAD_TYPE_EXT;
    attr.payload.ullValue = reinterpret_cast<uintptr_t>(payloads);
    attr.reserved0 = count;
  }
  nvtxDomainRangePushEx(nvtx().domain, &attr);
}

}  // namespace

// As NCCL (2.2x) annotates the calls that learn their parameters as they go: the range opens with
// its name alone and gets its payload as it closes (nvtxRangePopPayload), once the communicator
// exists; a call that fails first closes it without one.
void like_comm_init_rank(uint64_t comm, int nranks, int rank, int cuda_device) {
  push(nvtx().comm_init_rank, nullptr, 0);
  const CommInitRankParams p{comm, nranks, rank, cuda_device};
  const nvtxPayloadData_t data[] = {{kCommInitRankSchema, sizeof p, &p}};
  nvtxRangePopPayload(nvtx().domain, data, 1);
}

void like_all_reduce(uint64_t comm, size_t bytes, like_red_op op) {
  const AllReduceParams p{comm, bytes, op};
  const nvtxPayloadData_t data[] = {{kAllReduceSchema, sizeof p, &p}};
  push(nvtx().all_reduce, data, 1);
  nvtxDomainRangePop(nvtx().domain);
}

void like_broadcast(uint64_t comm, size_t bytes, int root) {
  const BroadcastParams p{comm, bytes, root};
  const nvtxPayloadData_t data[] = {{kBroadcastSchema, sizeof p, &p}};
  push(nvtx().broadcast, data, 1);
  nvtxDomainRangePop(nvtx().domain);
}

// What a careless annotator may hand a tool: a schema never registered, a payload far larger than its
// schema, a null payload that claims bytes, several payloads at once. All in ncclAllReduce ranges.
void like_bad_payloads() {
  const uint64_t unknown[2] = {0x1122334455667788ull, 42};
  const nvtxPayloadData_t unregistered[] = {{kStatic + 99, sizeof unknown, unknown}};
  push(nvtx().all_reduce, unregistered, 1);
  nvtxDomainRangePop(nvtx().domain);

  static unsigned char big[5000];
  const AllReduceParams head{7, 64, like_min};
  __builtin_memcpy(big, &head, sizeof head);
  const nvtxPayloadData_t oversized[] = {{kAllReduceSchema, sizeof big, big}};
  push(nvtx().all_reduce, oversized, 1);
  nvtxDomainRangePop(nvtx().domain);

  const nvtxPayloadData_t null_bytes[] = {{kAllReduceSchema, 24, nullptr}};
  push(nvtx().all_reduce, null_bytes, 1);
  nvtxDomainRangePop(nvtx().domain);

  const AllReduceParams first{8, 128, like_avg}, second{9, 256, like_sum};
  const nvtxPayloadData_t two[] = {{kAllReduceSchema, sizeof first, &first}, {kAllReduceSchema, sizeof second, &second}};
  push(nvtx().all_reduce, two, 2);
  nvtxDomainRangePop(nvtx().domain);
}
