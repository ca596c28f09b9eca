// The trace reader's naming: the records that name things (threads, modules, kernels, NVTX domains,
// strings and payload schemas, a process's job) applied to the model the events are delivered with.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "reader/decode.h"
#include "reader/trace_claim.h"
#include "reader/trace_reader.h"
#include "reader/trace_reader_internal.h"

namespace cutrace::reader {

using namespace detail;

// A payload schema or enum, or one of its entries: `values` holds the record's payload bytes, which
// must be the struct of its event (a record of a later build may hold more; one with less is ignored).
static void apply_payload_registration(NvtxPayloadTypes& types, const abi::NvtxRecord& r, std::string name,
                                const uint8_t* values) {
  const std::pair<uint32_t, uint64_t> key{r.domain, r.string_id};
  const bool cut = r.text_cut || (r.payload_cut & abi::kNvtxPayloadCutEntries);
  // Entries beyond what the shim records (it keeps 256) cannot come from a well-formed trace.
  constexpr uint32_t kMaxEntries = 4096;
  switch (abi::NvtxEvent(r.header.aux)) {
    case abi::NvtxEvent::kPayloadSchema: {
      if (r.payload_bytes < sizeof(abi::NvtxSchemaInfo)) return;
      const auto info = load<abi::NvtxSchemaInfo>(values);
      NvtxSchema& s = types.schemas[key];
      s = NvtxSchema{};  // registered again (by another module): the new entries follow
      s.name = std::move(name);
      s.type = info.type;
      s.flags = info.flags;
      s.static_size = info.static_size;
      s.declared_entries = info.entries;
      s.cut = cut;
      break;
    }
    case abi::NvtxEvent::kPayloadSchemaEntry: {
      auto it = types.schemas.find(key);
      if (it == types.schemas.end() || r.payload_bytes < sizeof(abi::NvtxSchemaEntry) || r.category >= kMaxEntries) return;
      const auto e = load<abi::NvtxSchemaEntry>(values);
      std::vector<NvtxSchemaField>& fields = it->second.fields;
      if (fields.size() <= r.category) fields.resize(r.category + 1);
      fields[r.category] = {std::move(name), e.type, e.flags, e.offset, e.array_or_union_detail};
      if (r.text_cut) it->second.cut = true;
      break;
    }
    case abi::NvtxEvent::kPayloadEnum: {
      if (r.payload_bytes < sizeof(abi::NvtxEnumInfo)) return;
      const auto info = load<abi::NvtxEnumInfo>(values);
      NvtxEnum& e = types.enums[key];
      e = NvtxEnum{};
      e.name = std::move(name);
      e.size = info.size == 0 || info.size > 8 ? 4 : info.size;
      e.declared_entries = info.entries;
      e.cut = cut;
      break;
    }
    case abi::NvtxEvent::kPayloadEnumEntry: {
      auto it = types.enums.find(key);
      if (it == types.enums.end() || r.payload_bytes < sizeof(abi::NvtxEnumEntry) || r.category >= kMaxEntries) return;
      const auto e = load<abi::NvtxEnumEntry>(values);
      std::vector<NvtxEnumValue>& values_of = it->second.values;
      if (values_of.size() <= r.category) values_of.resize(r.category + 1);
      values_of[r.category] = {std::move(name), e.value, e.is_flag != 0};
      if (r.text_cut) it->second.cut = true;
      break;
    }
    default: break;
  }
}

void TraceReader::read_names_ahead() {
  // Only chunk headers are read on the way; a damaged or cut-off file simply has no names read
  // ahead, and the stream reports what is wrong with it when it gets there.
  uint64_t at = header_.header_bytes;
  std::vector<uint8_t> stored, payload;
  while (file_bytes_ - at >= sizeof(ChunkHeader)) {
    ChunkHeader ch;
    if (pread_full(fd_, &ch, sizeof ch, at) < sizeof ch) return;
    // Past a damaged header, on to the next sound one, as the stream itself will go.
    if (!header_sound(ch, at) && !find_chunk_header(at + 1, 0, ch, at)) return;
    if (ChunkType(ch.type) == ChunkType::kEnd) return;
    if (ChunkType(ch.type) == ChunkType::kNames) {
      if (ch.codec != uint16_t(format::Codec::kZstd) || ch.raw_bytes > format::kMaxChunkRawBytes) return;
      stored.resize(ch.stored_bytes);
      payload.resize(ch.raw_bytes);
      if (pread_full(fd_, stored.data(), ch.stored_bytes, at + sizeof ch) < ch.stored_bytes) return;
      // zstd verifies the frame's content checksum while decompressing.
      const size_t n = ZSTD_decompressDCtx(dctx_, payload.data(), payload.size(), stored.data(), stored.size());
      std::vector<names::ProcessNames> list;
      if (ZSTD_isError(n) || n != ch.raw_bytes || !names::decode(payload.data(), n, list)) return;
      add_kernel_names(list);
      return;
    }
    at += sizeof ch + ch.stored_bytes;
  }
}

void TraceReader::add_kernel_names(std::vector<names::ProcessNames>& list) {
  for (names::ProcessNames& n : list) {
    Process* known = nullptr;
    if (auto it = processes_by_pid_.find(n.pid); it != processes_by_pid_.end())
      for (uint32_t i : it->second)
        if (processes_[i].start_ticks == n.start_ticks) known = &processes_[i];
    if (known) {
      apply_kernel_names(*known, n);
    } else {
      names::ProcessNames& pending = pending_names_[{n.pid, n.start_ticks}];
      pending.kernels.insert(pending.kernels.end(), n.kernels.begin(), n.kernels.end());
      pending.handles.insert(pending.handles.end(), n.handles.begin(), n.handles.end());
    }
  }
}

void TraceReader::apply_kernel_names(Process& p, const names::ProcessNames& n) {
  for (const auto& [key, mangled] : n.kernels) {
    auto [it, added] = p.kernel_names.try_emplace(key);
    if (!added) continue;
    it->second.mangled = mangled;
    it->second.demangled = demangle(mangled);
  }
  for (const auto& [handle, key] : n.handles) p.kernel_aliases.emplace(handle, key);
}

void TraceReader::apply_call_names(Thread& t, const uint8_t* rec, uint32_t size) {
  (void)size;
  const ApiSpec* spec = find_api(load<uint32_t>(rec + offsetof(abi::RecordHeader, aux)));
  if (!spec || spec->alias_out_arg < 0) return;
  const uint8_t argc = rec[offsetof(abi::ApiCallRecord, arg_count)];
  if (spec->alias_out_arg >= argc || spec->alias_in_arg >= argc) return;
  const uint64_t derived = load<uint64_t>(rec + sizeof(abi::ApiCallRecord) + 8 * size_t(spec->alias_out_arg));
  const uint64_t from = load<uint64_t>(rec + sizeof(abi::ApiCallRecord) + 8 * size_t(spec->alias_in_arg));
  // A failed call leaves its out-parameter at 0 (the wrappers record 0 then): nothing to learn from it.
  if (derived && from && derived != from) processes_[t.process].kernel_aliases[derived] = from;
}

void TraceReader::apply_module(Thread& t, const uint8_t* rec) {
  auto r = load<abi::ModuleRecord>(rec);
  std::vector<Module>& modules = processes_[t.process].modules;
  if (r.header.aux == uint32_t(abi::ModuleEvent::kUnloaded)) {
    // Ends the latest load of the same object that is still open; an unload of nothing known (its load
    // was in a damaged chunk) changes nothing.
    for (auto m = modules.rbegin(); m != modules.rend(); ++m) {
      if (m->base == r.base && m->text_start == r.text_start && m->text_end == r.text_end &&
          m->unloaded_at == UINT64_MAX) {
        m->unloaded_at = std::max(r.time, m->loaded_at);
        break;
      }
    }
    return;
  }
  Module m;
  m.base = r.base;
  m.text_start = r.text_start;
  m.text_end = r.text_end;
  m.flags = r.flags;
  m.loaded_at = r.time;
  m.build_id.assign(reinterpret_cast<const char*>(r.build_id), r.build_id_bytes);
  m.path.assign(reinterpret_cast<const char*>(rec + sizeof(abi::ModuleRecord)), r.path_bytes);
  modules.push_back(std::move(m));
}

void TraceReader::apply_events() {
  const uint8_t* p = raw_.data();
  // Only what validate_events() found to apply: thread definitions (at their block header) and the
  // records that name things; in file order.
  for (const PendingApply& at : to_apply_) {
    const uint8_t* r = p + at.offset;
    if (at.thread_def) {
      auto def = load<format::ThreadDef>(r + sizeof(BlockHeader));
      Process& proc = process_for(def);
      Thread& t = threads_.emplace_back();
      t.index = def.thread_index;
      t.pid = def.pid;
      t.tid = def.tid;
      t.ppid = def.ppid;
      t.process_start_ticks = def.process_start_ticks;
      t.claim_serial = def.claim_serial;
      t.first_seen_ns = def.first_seen_ns;
      t.process = proc.index;
      proc.threads.push_back(def.thread_index);
      thread_pos_[def.thread_index] = uint32_t(threads_.size() - 1);
      continue;
    }
    Thread& t = *mutable_thread(at.thread_index);
    auto h = load<abi::RecordHeader>(r);
    if (abi::RecordKind(h.kind) == abi::RecordKind::kString) {
      auto length = load<uint32_t>(r + offsetof(abi::StringRecord, length));
      std::string_view text(reinterpret_cast<const char*>(r + sizeof(abi::StringRecord)), length);
      Process& proc = processes_[t.process];
      switch (abi::StringKind(h.aux)) {
        case abi::StringKind::kKernelName: {
          uint64_t key = load<uint64_t>(r + offsetof(abi::StringRecord, key));
          KernelName& k = proc.kernel_names[key];
          k.mangled.assign(text);
          k.demangled = demangle(text);
          break;
        }
        case abi::StringKind::kThreadName: t.name.assign(text); break;
        case abi::StringKind::kProcessCommand: proc.command.assign(text); break;
        case abi::StringKind::kProcessExe: proc.exe.assign(text); break;
        case abi::StringKind::kCudaRuntime:
          proc.cuda_runtime_version = uint32_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          proc.cuda_runtime_path.assign(text);
          break;
        case abi::StringKind::kProcessJob: apply_job(proc, text); break;
        case abi::StringKind::kUnwrappedEntryPoint:
        case abi::StringKind::kGpuActivityLent:
          break;  // the recorder's warnings (metadata warning.N) say what they mean
        case abi::StringKind::kGpuKernelName: {
          KernelName& k = proc.gpu_kernel_names[load<uint64_t>(r + offsetof(abi::StringRecord, key))];
          k.mangled.assign(text);
          k.demangled = demangle(text);
          break;
        }
        case abi::StringKind::kGpuActivityStatus: {
          // CUPTI that started late, after the shim said it had not started in time: the start wins.
          const auto code = int64_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          if (proc.gpu_status_code == 0 && code != 0) break;
          proc.gpu_status_code = code;
          proc.gpu_status.assign(text);
          break;
        }
        case abi::StringKind::kPythonFramesStatus: {
          // A check that failed after the frames were accepted: the refusal wins.
          const auto code = int64_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          if (proc.python_frames_code == 1 && code != 1) break;
          proc.python_frames_code = code;
          proc.python_frames_status.assign(text);
          break;
        }
        case abi::StringKind::kPytorchStatus: {
          // A failure of one import is not taken back by a later success.
          const auto code = int64_t(load<uint64_t>(r + offsetof(abi::StringRecord, key)));
          if (proc.pytorch_code == 1 && code != 1) break;
          proc.pytorch_code = code == 0 ? 0 : 1;
          proc.pytorch_status.assign(text);
          break;
        }
        case abi::StringKind::kPythonFunction: {
          const size_t nul = text.find('\0');
          Process::PythonFunction& f = proc.python_functions[load<uint64_t>(r + offsetof(abi::StringRecord, key))];
          f.name.assign(text.substr(0, nul));
          f.file.assign(nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1));
          break;
        }
      }
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kApiCall) {
      apply_call_names(t, r, h.size);
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kModuleMap) {
      apply_module(t, r);
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kNvtx) {
      apply_nvtx_name(t, r);
    } else if (abi::RecordKind(h.kind) == abi::RecordKind::kGpuDevice) {
      apply_gpu_device(t, r);
    }
  }
}

void TraceReader::apply_nvtx_name(Thread& t, const uint8_t* rec) {
  auto r = load<abi::NvtxRecord>(rec);
  std::string text(reinterpret_cast<const char*>(rec + sizeof(abi::NvtxRecord)), r.text_bytes);
  Process& proc = processes_[t.process];
  switch (abi::NvtxEvent(r.header.aux)) {
    case abi::NvtxEvent::kDomainCreate: proc.nvtx_domains[r.domain] = std::move(text); break;
    case abi::NvtxEvent::kRegisterString: proc.nvtx_strings[r.string_id] = std::move(text); break;
    case abi::NvtxEvent::kNameCategory: proc.nvtx_categories[uint64_t(r.domain) << 32 | r.category] = std::move(text); break;
    case abi::NvtxEvent::kNameThread: proc.nvtx_thread_names[uint32_t(r.range_id)] = std::move(text); break;
    case abi::NvtxEvent::kNameResource:
      proc.nvtx_resources[uint64_t(r.category) << 56 ^ r.range_id] = std::move(text);
      break;
    case abi::NvtxEvent::kPayloadSchema:
    case abi::NvtxEvent::kPayloadSchemaEntry:
    case abi::NvtxEvent::kPayloadEnum:
    case abi::NvtxEvent::kPayloadEnumEntry:
      apply_payload_registration(proc.nvtx_payload_types, r, std::move(text),
                                 rec + sizeof(abi::NvtxRecord) + r.text_bytes);
      break;
    default: break;
  }
}

}  // namespace cutrace::reader
