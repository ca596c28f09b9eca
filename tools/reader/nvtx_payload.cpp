#include "reader/nvtx_payload.h"

#include "cutrace/abi.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace cutrace::reader {
namespace {

// NVTX_PAYLOAD_ENTRY_TYPE_* values (nvToolsExtPayload.h), named here so the reader needs no NVTX header.
enum : uint64_t {
  kChar = 1, kUchar, kShort, kUshort, kInt, kUint, kLong, kUlong, kLonglong, kUlonglong,
  kInt8, kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kUint64,
  kFloat = 19, kDouble, kLongDouble, kSize, kAddress, kWchar, kChar8, kChar16, kChar32,
  kByte = 32, kInt128, kUint128,
  kFloat16 = 42, kFloat32, kFloat64, kFloat128,
  kBf16 = 50, kTf32 = 52,
  kCategory = 68, kColorArgb, kScopeId, kPidUint32, kPidUint64, kTidUint32, kTidUint64,
  kCstring = 75, kCstringUtf8, kCstringUtf16, kCstringUtf32,
  kRegisteredString = 80,
};
constexpr uint64_t kFlagPointer = 1 << 1;
constexpr uint64_t kFlagArrayMask = 7 << 4;
constexpr uint64_t kFlagArrayFixed = 1 << 4;
constexpr int kMaxNesting = 4;

enum class Shape : uint8_t { kSigned, kUnsigned, kReal, kHalf, kBfloat, kAddress, kUnknown };
struct Scalar {
  Shape shape;
  uint32_t bytes;
};

// Sizes as an LP64 (x86-64, aarch64 Linux) process lays them out, which is where traces come from.
Scalar scalar(uint64_t type) {
  switch (type) {
    case kChar: case kInt8: return {Shape::kSigned, 1};
    case kUchar: case kUint8: case kChar8: case kByte: return {Shape::kUnsigned, 1};
    case kShort: case kInt16: return {Shape::kSigned, 2};
    case kUshort: case kUint16: case kChar16: return {Shape::kUnsigned, 2};
    case kInt: case kInt32: return {Shape::kSigned, 4};
    case kUint: case kUint32: case kWchar: case kChar32: case kCategory: case kColorArgb: case kPidUint32:
    case kTidUint32: return {Shape::kUnsigned, 4};
    case kLong: case kLonglong: case kInt64: return {Shape::kSigned, 8};
    case kUlong: case kUlonglong: case kUint64: case kSize: case kScopeId: case kPidUint64: case kTidUint64:
    case kRegisteredString: return {Shape::kUnsigned, 8};
    case kFloat: case kFloat32: case kTf32: return {Shape::kReal, 4};
    case kDouble: case kFloat64: return {Shape::kReal, 8};
    case kFloat16: return {Shape::kHalf, 2};
    case kBf16: return {Shape::kBfloat, 2};
    case kAddress: case kCstring: case kCstringUtf8: case kCstringUtf16: case kCstringUtf32: return {Shape::kAddress, 8};
    case kLongDouble: case kInt128: case kUint128: case kFloat128: return {Shape::kUnknown, 16};
    default: return {Shape::kUnknown, 0};
  }
}

bool is_char(uint64_t type) { return type == kChar || type == kChar8 || type == kCstring || type == kCstringUtf8; }

uint64_t load_unsigned(const char* p, uint32_t bytes) {
  uint64_t v = 0;
  std::memcpy(&v, p, bytes);  // little-endian
  return v;
}

NvtxPayloadValue number(Shape shape, const char* p, uint32_t bytes) {
  NvtxPayloadValue v;
  const uint64_t raw = load_unsigned(p, bytes);
  switch (shape) {
    case Shape::kSigned:
      v.kind = NvtxPayloadValue::Kind::kSigned;
      v.i = bytes == 8 ? int64_t(raw) : int64_t(raw << (64 - 8 * bytes)) >> (64 - 8 * bytes);
      break;
    case Shape::kReal:
      v.kind = NvtxPayloadValue::Kind::kReal;
      if (bytes == 4) {
        float f;
        std::memcpy(&f, p, 4);
        v.d = f;
      } else {
        std::memcpy(&v.d, p, 8);
      }
      break;
    case Shape::kHalf: {
      v.kind = NvtxPayloadValue::Kind::kReal;
      const uint32_t h = uint32_t(raw), exponent = h >> 10 & 0x1f, mantissa = h & 0x3ff;
      const double sign = h & 0x8000 ? -1 : 1;
      if (exponent == 0) v.d = sign * std::ldexp(double(mantissa), -24);
      else if (exponent == 31) v.d = mantissa ? NAN : sign * INFINITY;
      else v.d = sign * std::ldexp(double(mantissa | 0x400), int(exponent) - 25);
      break;
    }
    case Shape::kBfloat: {
      v.kind = NvtxPayloadValue::Kind::kReal;
      const uint32_t bits = uint32_t(raw) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      v.d = f;
      break;
    }
    case Shape::kAddress: {
      // A pointer into the program's memory, which the trace does not have: shown, not followed.
      char text[32];
      std::snprintf(text, sizeof text, "0x%" PRIx64, raw);
      v.kind = NvtxPayloadValue::Kind::kText;
      v.text = text;
      break;
    }
    default:
      v.kind = NvtxPayloadValue::Kind::kUnsigned;
      v.u = raw;
      break;
  }
  return v;
}

std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

struct Decoder {
  const NvtxPayloadTypes& types;
  uint32_t domain;
  DecodedPayload& out;

  void problem(const std::string& what) {
    if (!out.problem.empty()) out.problem += "; ";
    out.problem += what;
  }

  // The size and alignment of one element of `type`; 0 when not known.
  uint64_t element_size(uint64_t type, uint64_t flags, uint64_t* align, int depth) const {
    if (flags & kFlagPointer) return *align = 8, 8;
    if (auto e = types.enums.find({domain, type}); e != types.enums.end()) return *align = e->second.size, e->second.size;
    if (auto s = types.schemas.find({domain, type}); s != types.schemas.end() && depth < kMaxNesting) {
      uint64_t end = 0, max_align = 1;
      layout(s->second, depth + 1, &end, &max_align);
      *align = max_align;
      const uint64_t size = (end + max_align - 1) / max_align * max_align;
      return s->second.static_size ? s->second.static_size : size;
    }
    const Scalar sc = scalar(type);
    return *align = sc.bytes ? sc.bytes : 1, sc.bytes;
  }

  uint64_t field_size(const NvtxSchemaField& f, uint64_t* align, int depth) const {
    const uint64_t element = element_size(f.type, f.flags, align, depth);
    const bool fixed_string = is_char(f.type) && !(f.flags & (kFlagPointer | kFlagArrayMask)) && f.array_or_union_detail;
    if ((f.flags & kFlagArrayMask) == kFlagArrayFixed || fixed_string) {
      if (is_char(f.type)) *align = 1;
      return (is_char(f.type) ? 1 : element) * f.array_or_union_detail;
    }
    return element;
  }

  // Each field's offset: as registered, or by natural alignment after the one before when the schema
  // gives 0 past its first entry.
  std::vector<uint64_t> layout(const NvtxSchema& s, int depth, uint64_t* end, uint64_t* max_align) const {
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (size_t i = 0; i < s.fields.size(); ++i) {
      const NvtxSchemaField& f = s.fields[i];
      uint64_t align = 1;
      const uint64_t size = field_size(f, &align, depth);
      if (align == 0) align = 1;
      uint64_t at = f.offset;
      if (i > 0 && at == 0) at = (next + align - 1) / align * align;
      offsets.push_back(at);
      next = at + size;
      if (align > *max_align) *max_align = align;
    }
    *end = next;
    return offsets;
  }

  void decode(const NvtxSchema& s, std::string_view bytes, const std::string& prefix, int depth) {
    uint64_t end = 0, max_align = 1;
    const std::vector<uint64_t> offsets = layout(s, depth, &end, &max_align);
    for (size_t i = 0; i < s.fields.size(); ++i) {
      const NvtxSchemaField& f = s.fields[i];
      const std::string name = prefix + (f.name.empty() ? "#" + std::to_string(i) : f.name);
      uint64_t align = 1;
      const uint64_t size = field_size(f, &align, depth);
      if (size == 0) {
        problem("field " + name + " has a type this cutrace does not decode (" + std::to_string(f.type) + ")");
        continue;
      }
      if (offsets[i] > bytes.size() || size > bytes.size() - offsets[i]) {
        problem("field " + name + " lies beyond the " + std::to_string(bytes.size()) + " bytes recorded");
        continue;
      }
      const char* p = bytes.data() + offsets[i];
      field(f, name, std::string_view(p, size), depth);
    }
  }

  void field(const NvtxSchemaField& f, const std::string& name, std::string_view bytes, int depth) {
    NvtxPayloadField out_field;
    out_field.name = name;
    NvtxPayloadValue& v = out_field.value;
    const bool array = (f.flags & kFlagArrayMask) == kFlagArrayFixed;
    if (is_char(f.type) && !(f.flags & kFlagPointer) && (array || f.array_or_union_detail)) {
      v.kind = NvtxPayloadValue::Kind::kText;
      v.text.assign(bytes.data(), strnlen(bytes.data(), bytes.size()));
    } else if (f.flags & kFlagPointer) {
      v = number(Shape::kAddress, bytes.data(), 8);
    } else if (auto e = types.enums.find({domain, f.type}); e != types.enums.end()) {
      const uint32_t width = uint32_t(std::min<uint64_t>(e->second.size, 8));
      const uint64_t raw = load_unsigned(bytes.data(), width);
      v.kind = NvtxPayloadValue::Kind::kText;
      for (const NvtxEnumValue& ev : e->second.values)
        if (ev.value == raw) v.text = ev.name;
      if (v.text.empty()) v.text = std::to_string(raw);
    } else if (auto s = types.schemas.find({domain, f.type}); s != types.schemas.end()) {
      if (depth >= kMaxNesting) return problem("field " + name + " nests schemas too deep");
      decode(s->second, bytes, name + ".", depth + 1);
      return;
    } else {
      const Scalar sc = scalar(f.type);
      if (sc.shape == Shape::kUnknown) {
        v.kind = NvtxPayloadValue::Kind::kText;
        v.text = hex(bytes);
      } else if (array) {
        v.kind = NvtxPayloadValue::Kind::kText;
        v.text = "[";
        for (uint64_t at = 0; at + sc.bytes <= bytes.size(); at += sc.bytes) {
          if (at) v.text += ", ";
          v.text += nvtx_payload_text(number(sc.shape, bytes.data() + at, sc.bytes));
        }
        v.text += "]";
      } else {
        v = number(sc.shape, bytes.data(), sc.bytes);
      }
    }
    out.fields.push_back(std::move(out_field));
  }
};

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

}  // namespace

DecodedPayload decode_nvtx_payload(const NvtxPayloadTypes& types, uint32_t domain, uint64_t schema,
                                   std::string_view bytes, uint8_t cut) {
  DecodedPayload out;
  Decoder d{types, domain, out};
  auto it = types.schemas.find({domain, schema});
  if (it == types.schemas.end()) {
    out.fields.push_back({"payload", {NvtxPayloadValue::Kind::kText, 0, 0, 0, hex(bytes)}});
    d.problem("schema " + std::to_string(schema) + " is not registered in the trace");
  } else {
    d.decode(it->second, bytes, "", 0);
  }
  if (cut & abi::kNvtxPayloadCutBytes)
    d.problem("the program gave more bytes than the " + std::to_string(bytes.size()) + " recorded");
  if (cut & abi::kNvtxPayloadCutMore) d.problem("the program gave more payloads; the first was recorded");
  return out;
}

std::string nvtx_payload_text(const NvtxPayloadValue& v) {
  switch (v.kind) {
    case NvtxPayloadValue::Kind::kSigned: return std::to_string(v.i);
    case NvtxPayloadValue::Kind::kUnsigned: return std::to_string(v.u);
    case NvtxPayloadValue::Kind::kReal: {
      char text[40];
      std::snprintf(text, sizeof text, "%.17g", v.d);
      return text;
    }
    case NvtxPayloadValue::Kind::kText: return v.text;
  }
  return {};
}

std::string nvtx_payload_json(const DecodedPayload& payload) {
  std::string out = "{";
  for (const NvtxPayloadField& f : payload.fields) {
    if (out.size() > 1) out += ", ";
    json_string(out, f.name);
    out += ": ";
    const bool finite = f.value.kind != NvtxPayloadValue::Kind::kReal || std::isfinite(f.value.d);
    if (f.value.kind == NvtxPayloadValue::Kind::kText || !finite) json_string(out, nvtx_payload_text(f.value));
    else out += nvtx_payload_text(f.value);
  }
  if (!payload.problem.empty()) {
    if (out.size() > 1) out += ", ";
    out += "\"(problem)\": ";
    json_string(out, payload.problem);
  }
  out += "}";
  return out;
}

}  // namespace cutrace::reader
