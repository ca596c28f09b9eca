// NVTX extended payloads (the payload extension, nvToolsExtPayload.h): the schemas and enums a process
// registered, and the decoding of a payload's bytes by them into named fields.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cutrace::reader {

struct NvtxSchemaField {
  std::string name;
  uint64_t type = 0;    // NVTX_PAYLOAD_ENTRY_TYPE_*, or the id of a registered enum or schema
  uint64_t flags = 0;   // NVTX_PAYLOAD_ENTRY_FLAG_*
  uint64_t offset = 0;  // as registered (0 after the first entry: by natural alignment)
  uint64_t array_or_union_detail = 0;
};

struct NvtxSchema {
  std::string name;
  uint64_t type = 0, flags = 0, static_size = 0;
  uint64_t declared_entries = 0;  // as the program gave them; `fields` holds those recorded
  bool cut = false;               // names or entries were cut when it was recorded
  std::vector<NvtxSchemaField> fields;
};

struct NvtxEnumValue {
  std::string name;
  uint64_t value = 0;
  bool is_flag = false;
};

struct NvtxEnum {
  std::string name;
  uint64_t size = 4;
  uint64_t declared_entries = 0;
  bool cut = false;
  std::vector<NvtxEnumValue> values;
};

// A process's registrations, keyed by (domain, schema id).
struct NvtxPayloadTypes {
  std::map<std::pair<uint32_t, uint64_t>, NvtxSchema> schemas;
  std::map<std::pair<uint32_t, uint64_t>, NvtxEnum> enums;
};

// One decoded field: a number (integer, unsigned or real), or text (a string, an enumerator's name).
struct NvtxPayloadValue {
  enum class Kind : uint8_t { kSigned, kUnsigned, kReal, kText } kind = Kind::kUnsigned;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string text;
};

struct NvtxPayloadField {
  std::string name;
  NvtxPayloadValue value;
};

struct DecodedPayload {
  std::vector<NvtxPayloadField> fields;
  // Why not all of it could be decoded or recorded, sentences joined by "; ": empty when it all was.
  // A payload whose schema the trace never names is shown as its bytes, in hex.
  std::string problem;
};

// Decodes `bytes`, a payload of schema `schema` in `domain`, by the process's registrations. Fields that
// lie beyond the bytes recorded (a payload cut at abi::kMaxNvtxPayloadBytes) are left out and said so,
// as is what `cut` (abi::kNvtxPayloadCut*, as the shim recorded it) says was left out.
DecodedPayload decode_nvtx_payload(const NvtxPayloadTypes& types, uint32_t domain, uint64_t schema,
                                   std::string_view bytes, uint8_t cut = 0);

// The fields as one JSON object, {"name": value, ...}, in schema order; a problem adds "(problem)".
std::string nvtx_payload_json(const DecodedPayload& payload);

// A value as text ("1048576", "Sum", "2.5").
std::string nvtx_payload_text(const NvtxPayloadValue& value);

}  // namespace cutrace::reader
