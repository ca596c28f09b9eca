#include "report/nvtx_ranges.h"

namespace cutrace::report {

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

void NvtxRangeTracker::add(const reader::TraceReader& reader, const reader::Event& ev) {
  if (ev.kind != reader::EventKind::kNvtx) return;
  const reader::NvtxEvent& n = ev.nvtx;
  switch (n.type) {
    case abi::NvtxEvent::kPush: {
      std::vector<Open>& stack = stacks_[uint64_t(ev.thread->index) << 32 | n.domain];
      Open o;
      o.range.message.assign(n.text);
      NvtxRange& r = o.range;
      r.push_pop = true;
      r.start_ns = n.time_ns;
      r.thread = r.end_thread = ev.thread;
      r.domain = n.domain;
      r.name = nvtx_range_name(reader, *ev.thread, n.domain, n.text);
      r.id = next_id_++;
      r.level = uint32_t(stack.size());
      if (stack.empty()) {
        r.stack = ":" + std::to_string(r.id);
        r.name_tree = r.name;
      } else {
        const NvtxRange& parent = stack.back().range;
        r.parent_id = parent.id;
        r.stack = parent.stack + ":" + std::to_string(r.id);
        r.name_tree = parent.name_tree + ":" + r.message;
      }
      stack.push_back(std::move(o));
      break;
    }
    case abi::NvtxEvent::kPop: {
      auto it = stacks_.find(uint64_t(ev.thread->index) << 32 | n.domain);
      if (it == stacks_.end() || it->second.empty()) {
        ++unmatched_;
        break;
      }
      Open o = std::move(it->second.back());
      it->second.pop_back();
      o.range.end_ns = n.time_ns < o.range.start_ns ? o.range.start_ns : n.time_ns;
      if (!it->second.empty()) {
        NvtxRange& parent = it->second.back().range;
        parent.child_ns += o.range.end_ns - o.range.start_ns;
        ++parent.children;
      }
      visit_(o.range);
      break;
    }
    case abi::NvtxEvent::kStart: {
      Open o;
      o.range.message.assign(n.text);
      NvtxRange& r = o.range;
      r.push_pop = false;
      r.start_ns = n.time_ns;
      r.thread = r.end_thread = ev.thread;
      r.domain = n.domain;
      r.name = nvtx_range_name(reader, *ev.thread, n.domain, n.text);
      r.id = next_id_++;
      const uint64_t key = uint64_t(ev.thread->process) << 40 ^ n.range_id;
      auto early = ended_early_.find(key);
      if (early != ended_early_.end()) {
        r.end_ns = early->second.time_ns < r.start_ns ? r.start_ns : early->second.time_ns;
        r.end_thread = early->second.thread;
        ended_early_.erase(early);
        visit_(r);
        break;
      }
      started_[key] = std::move(o);
      break;
    }
    case abi::NvtxEvent::kEnd: {
      const uint64_t key = uint64_t(ev.thread->process) << 40 ^ n.range_id;
      auto it = started_.find(key);
      if (it == started_.end()) {
        // Ended on another thread whose ring was drained first: the start is still to come.
        ended_early_[key] = {n.time_ns, ev.thread};
        break;
      }
      NvtxRange r = std::move(it->second.range);
      started_.erase(it);
      r.end_ns = n.time_ns < r.start_ns ? r.start_ns : n.time_ns;
      r.end_thread = ev.thread;
      visit_(r);
      break;
    }
    default: break;
  }
}

uint64_t NvtxRangeTracker::open() const {
  uint64_t n = started_.size();
  for (const auto& [key, stack] : stacks_) n += stack.size();
  return n;
}

}  // namespace cutrace::report
