#include "model/nvtx_ranges.h"

#include <algorithm>

namespace cutrace::model {

std::string nvtx_range_name(const reader::TraceReader& reader, const reader::Thread& thread, uint32_t domain,
                            std::string_view message) {
  std::string name;
  if (domain != 0) {
    const reader::Process& proc = reader.processes()[thread.process];
    auto it = proc.nvtx_domains.find(domain);
    name = it != proc.nvtx_domains.end() ? it->second : "domain#" + std::to_string(domain);
  }
  name += ':';
  name.append(message);
  return name;
}

namespace {

// A range as it opens: what every kind of range knows at its start.
NvtxRange opened(const reader::TraceReader& reader, const reader::Event& ev, bool push_pop, uint64_t id) {
  const reader::NvtxEvent& n = ev.nvtx;
  NvtxRange r;
  r.push_pop = push_pop;
  r.start_ns = n.time_ns;
  r.thread = r.end_thread = ev.thread;
  r.domain = n.domain;
  r.message.assign(n.text);
  r.name = nvtx_range_name(reader, *ev.thread, n.domain, n.text);
  r.id = id;
  r.category = n.category;
  r.color = n.color;
  r.payload_type = n.payload_type;
  r.payload = n.payload;
  r.payload_bytes.assign(n.payload_bytes);
  r.payload_cut = n.payload_cut;
  return r;
}

// Closes `r` at `time_ns` on `thread`; a clock that stepped back never makes a negative duration.
void close(NvtxRange& r, uint64_t time_ns, const reader::Thread* thread) {
  r.end_ns = time_ns < r.start_ns ? r.start_ns : time_ns;
  r.end_thread = thread;
}

// An extended payload given as the range closed, where it opened without one.
void take_closing_payload(NvtxRange& r, uint64_t schema, std::string_view bytes, uint8_t cut) {
  if (r.payload_type == abi::NvtxPayload::kExtension) return;
  r.payload_type = abi::NvtxPayload::kExtension;
  r.payload = schema;
  r.payload_bytes.assign(bytes);
  r.payload_cut = cut;
}

bool has_extended_payload(const reader::NvtxEvent& n) { return n.payload_type == abi::NvtxPayload::kExtension; }

}  // namespace

void NvtxRangeTracker::add(const reader::TraceReader& reader, const reader::Event& ev) {
  if (ev.kind != reader::EventKind::kNvtx) return;
  const reader::NvtxEvent& n = ev.nvtx;
  switch (n.type) {
    case abi::NvtxEvent::kPush: {
      std::vector<NvtxRange>& stack = stacks_[uint64_t(ev.thread->index) << 32 | n.domain];
      NvtxRange r = opened(reader, ev, true, next_id_++);
      r.level = uint32_t(stack.size());
      if (stack.empty()) {
        r.stack = ":" + std::to_string(r.id);
        r.name_tree = r.name;
      } else {
        const NvtxRange& parent = stack.back();
        r.parent_id = parent.id;
        r.stack = parent.stack + ":" + std::to_string(r.id);
        r.name_tree = parent.name_tree + ":" + r.message;
      }
      stack.push_back(std::move(r));
      break;
    }
    case abi::NvtxEvent::kPop: {
      auto it = stacks_.find(uint64_t(ev.thread->index) << 32 | n.domain);
      if (it == stacks_.end() || it->second.empty()) {
        ++unmatched_;
        break;
      }
      NvtxRange r = std::move(it->second.back());
      it->second.pop_back();
      close(r, n.time_ns, ev.thread);
      if (has_extended_payload(n)) take_closing_payload(r, n.payload, n.payload_bytes, n.payload_cut);
      if (!it->second.empty()) {
        NvtxRange& parent = it->second.back();
        parent.child_ns += r.end_ns - r.start_ns;
        ++parent.children;
      }
      visit_(r);
      break;
    }
    case abi::NvtxEvent::kStart: {
      NvtxRange r = opened(reader, ev, false, next_id_++);
      const uint64_t key = uint64_t(ev.thread->process) << 40 ^ n.range_id;
      auto early = ended_early_.find(key);
      if (early == ended_early_.end()) {
        started_[key] = std::move(r);
        break;
      }
      close(r, early->second.time_ns, early->second.thread);
      if (!early->second.payload_bytes.empty() || early->second.payload != 0)
        take_closing_payload(r, early->second.payload, early->second.payload_bytes, early->second.payload_cut);
      ended_early_.erase(early);
      visit_(r);
      break;
    }
    case abi::NvtxEvent::kEnd: {
      const uint64_t key = uint64_t(ev.thread->process) << 40 ^ n.range_id;
      auto it = started_.find(key);
      if (it == started_.end()) {
        // Ended on another thread whose ring was drained first: the start is still to come.
        EarlyEnd& early = ended_early_[key] = EarlyEnd{n.time_ns, ev.thread, 0, {}, 0};
        if (has_extended_payload(n)) {
          early.payload = n.payload;
          early.payload_bytes.assign(n.payload_bytes);
          early.payload_cut = n.payload_cut;
        }
        break;
      }
      NvtxRange r = std::move(it->second);
      started_.erase(it);
      close(r, n.time_ns, ev.thread);
      if (has_extended_payload(n)) take_closing_payload(r, n.payload, n.payload_bytes, n.payload_cut);
      visit_(r);
      break;
    }
    default: break;
  }
}

bool parse_nvtx_filter(const std::string& text, NvtxFilter& f) {
  std::string spec = text;
  const size_t slash = spec.rfind('/');
  if (slash != std::string::npos && slash + 1 < spec.size() &&
      spec.find_first_not_of("0123456789", slash + 1) == std::string::npos) {
    f.index = std::stoull(spec.substr(slash + 1));
    if (f.index == 0) return false;
    spec.resize(slash);
  }
  const size_t at = spec.rfind('@');
  if (at != std::string::npos) {
    const std::string domain = spec.substr(at + 1);
    f.domain = domain == "*" ? NvtxFilter::Domain::kAny : NvtxFilter::Domain::kNamed;
    f.domain_name = domain;
    spec.resize(at);
    if (domain.empty()) return false;
  }
  if (spec.empty()) return false;
  f.range = spec;
  f.on = true;
  return true;
}


bool collect_nvtx_windows(const std::string& trace_path, const NvtxFilter& f, NvtxWindows& windows, uint64_t& found) {
  reader::TraceReader trace;
  if (!trace.open(trace_path)) return false;
  struct Match {
    uint64_t start, end;
    uint32_t process;
  };
  std::vector<Match> matches;  // one per instance: small next to the trace
  NvtxRangeTracker tracker([&](const NvtxRange& r) {
    if (r.message != f.range) return;
    if (f.domain == NvtxFilter::Domain::kDefault && r.domain != 0) return;
    if (f.domain == NvtxFilter::Domain::kNamed &&
        nvtx_range_name(trace, *r.thread, r.domain, "") != f.domain_name + ":")
      return;
    matches.push_back({r.start_ns, r.end_ns, r.thread->process});
  });
  reader::Event ev;
  while (trace.next(ev)) tracker.add(trace, ev);
  // Instances are numbered in the order they started.
  std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) { return a.start < b.start; });
  found = matches.size();
  for (size_t i = 0; i < matches.size(); ++i)
    if (!f.index || i + 1 == f.index) windows[matches[i].process].emplace_back(matches[i].start, matches[i].end);
  for (auto& [process, list] : windows) std::sort(list.begin(), list.end());
  return true;
}

bool inside_nvtx_windows(const NvtxWindows& windows, uint32_t process, uint64_t from, uint64_t to) {
  auto it = windows.find(process);
  if (it == windows.end()) return false;
  const auto& list = it->second;
  auto w = std::upper_bound(list.begin(), list.end(), std::make_pair(from, UINT64_MAX));
  // Windows may overlap (nested instances): look back over every one that starts no later.
  while (w != list.begin()) {
    --w;
    if (w->first <= from && to <= w->second) return true;
  }
  return false;
}

std::string describe(const NvtxFilter& f) {
  std::string text = f.range;
  if (f.domain != NvtxFilter::Domain::kDefault) text += "@" + f.domain_name;
  if (f.index) text += "/" + std::to_string(f.index);
  return text;
}

uint64_t NvtxRangeTracker::open() const {
  uint64_t n = started_.size();
  for (const auto& [key, stack] : stacks_) n += stack.size();
  return n;
}

}  // namespace cutrace::model
