#include "export/perfetto_proto.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <iterator>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "perfetto_trace.pb.h"

namespace cutrace::exporting {
namespace {

using model::TimelineArg;
using model::TimelineArgs;
using model::TimelineSlice;

namespace pb = cutrace::perfetto;
using Coded = google::protobuf::io::CodedOutputStream;
using WireFormat = google::protobuf::internal::WireFormatLite;

// Perfetto's clock ids: BOOTTIME, the default trace clock, and the first of the ids a sequence may
// define for itself.
constexpr uint32_t kTraceClock = 6;
constexpr uint32_t kIncrementalClock = 64;
constexpr uint32_t kIncrementalStateCleared = 1;  // TracePacket.SequenceFlags
constexpr uint32_t kNeedsIncrementalState = 2;

// Interning: a string's id is its place in a table shared by the whole file (plus one: iid 0 is not
// valid); a sequence writes a string's definition the first time it uses it.
struct StringTable {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, uint64_t, Hash, std::equal_to<>> ids;
  std::vector<const std::string*> by_id;

  uint64_t id(std::string_view s) {
    auto it = ids.find(s);
    if (it != ids.end()) return it->second;
    const uint64_t id = by_id.size() + 1;
    auto [at, _] = ids.emplace(std::string(s), id);
    by_id.push_back(&at->first);
    return id;
  }
};

enum InternTable { kNames, kKeys, kValues, kCategories, kTables };

// A packet sequence: its id and what it has interned.
struct Sequence {
  uint32_t id = 0;
  std::vector<bool> defined[kTables];
};

uint64_t clamp(int64_t ns) { return ns < 0 ? 0 : uint64_t(ns); }

}  // namespace

struct ProtoSink::State {
  struct OpenCall {
    uint64_t end;
    uint16_t depth;
  };
  // A thread's calls: a sequence of their own, whose defaults put events on the thread's track and
  // whose timestamps are deltas from the previous packet's.
  struct Thread {
    uint64_t uuid = 0;
    Sequence calls;
    uint64_t clock = 0;            // the incremental clock's last value
    std::vector<OpenCall> open;    // begun, not yet ended: innermost last
    // Calls handed over but not yet written: those that give the device work wait for their API link
    // (the flow), and those after them wait their turn.
    std::deque<TimelineSlice> queue;
    std::deque<uint64_t> flows;    // per queued call: 0, or the flow it starts
    std::deque<bool> decided;
    // API links that came before their call's record (the shim writes one from CUPTI's callback,
    // inside the call): a bounded number, for the calls still to come.
    struct Link {
      uint64_t time;
      uint32_t api;
      uint64_t flow;
    };
    std::deque<Link> early;
  };
  struct Lane {
    uint64_t uuid;
    uint64_t end;
  };
  explicit State(FILE* out) : out(out) {
    misc.id = 1;
    // The sequence of everything but calls: interned names, absolute times.
    packet.Clear();
    packet.set_trusted_packet_sequence_id(misc.id);
    packet.set_sequence_flags(kIncrementalStateCleared);
    packet.set_first_packet_on_sequence(true);
    write();
  }

  void write() {
    const size_t size = packet.ByteSizeLong();
    uint8_t* p = room(size + kPacketHeadBytes);
    *p++ = kPacketTag;
    p = Coded::WriteVarint32ToArray(uint32_t(size), p);
    p = packet.SerializeWithCachedSizesToArray(p);
    used = size_t(p - buf.data());
  }

  // Where `bytes` more can be written into the buffer, which is flushed first when they would not fit.
  uint8_t* room(size_t bytes) {
    if (buf.size() - used < bytes) {
      flush();
      if (buf.size() < bytes) buf.resize(bytes);
    }
    return buf.data() + used;
  }

  void flush() {
    if (used) std::fwrite(buf.data(), 1, used, out);
    used = 0;
  }

  // The iid of `s` in `table` on `seq`, its definition added to the packet when the sequence has not
  // had it.
  uint64_t iid(Sequence& seq, InternTable table, std::string_view s) { return define(seq, table, s, tables[table].id(s)); }

  // The same, for a string that is usually the one `recent` held last (a call's argument names and
  // values, slot by slot, are those of the previous call of its api): compared, not hashed.
  // `unmoving`: `s` stays where it is with the same text for as long as this file is written (an api
  // table's names, static strings), so the same place is the same string.
  struct Recent {
    const char* data = nullptr;
    std::string text;
    uint64_t id = 0;
    uint32_t defined_on = 0;  // a sequence found to have `id` defined already (0: none)
  };
  // Makes `recent` hold `s` and its id.
  void remember(InternTable table, std::string_view s, Recent& recent, bool unmoving) {
    const bool same_place = unmoving && recent.data == s.data() && recent.text.size() == s.size();
    if (recent.id == 0 || (!same_place && recent.text != s)) {
      recent.text.assign(s);
      const uint64_t id = tables[table].id(s);
      if (id != recent.id) recent.defined_on = 0;
      recent.id = id;
    }
    recent.data = unmoving ? s.data() : nullptr;
  }
  uint64_t iid(Sequence& seq, InternTable table, std::string_view s, Recent& recent, bool unmoving) {
    remember(table, s, recent, unmoving);
    return define(seq, table, s, recent.id);
  }

  // The id `iid` would give, and whether the sequence has its definition already; defines nothing.
  // A sequence never forgets a definition, so one found there once needs no second look.
  uint64_t known_iid(const Sequence& seq, InternTable table, std::string_view s, Recent& recent, bool unmoving,
                     bool& defined) {
    remember(table, s, recent, unmoving);
    if (recent.defined_on != seq.id) {
      const std::vector<bool>& have = seq.defined[table];
      if (recent.id < have.size() && have[recent.id]) recent.defined_on = seq.id;
      else defined = false;
    }
    return recent.id;
  }

  uint64_t define(Sequence& seq, InternTable table, std::string_view s, uint64_t id) {
    std::vector<bool>& defined = seq.defined[table];
    if (defined.size() < id + 1) defined.resize(id + 1 + id / 2, false);
    if (defined[id]) return id;
    defined[id] = true;
    pb::InternedData* data = packet.mutable_interned_data();
    switch (table) {
      case kNames: {
        pb::EventName* n = data->add_event_names();
        n->set_iid(id);
        n->set_name(s.data(), s.size());
        break;
      }
      case kKeys: {
        pb::DebugAnnotationName* n = data->add_debug_annotation_names();
        n->set_iid(id);
        n->set_name(s.data(), s.size());
        break;
      }
      case kValues: {
        pb::InternedString* n = data->add_debug_annotation_string_values();
        n->set_iid(id);
        n->set_str(s.data(), s.size());
        break;
      }
      case kCategories: {
        pb::EventCategory* n = data->add_event_categories();
        n->set_iid(id);
        n->set_name(s.data(), s.size());
        break;
      }
      case kTables: break;
    }
    return id;
  }

  // What a call of one api interned last: its name, its domain and, slot by slot, its arguments'
  // names and repeated values. By api id, which is one trace's numbering: cleared between traces.
  struct ApiStrings {
    Recent name, category, correlation;
    std::vector<Recent> keys, values;
  };

  // `skip`: the index of an argument left out (-1: none).
  void annotate(Sequence& seq, pb::TrackEvent* event, const TimelineArgs& args, ApiStrings* recent = nullptr,
                int skip = -1) {
    if (recent && recent->keys.size() < args.size()) {
      recent->keys.resize(args.size());
      recent->values.resize(args.size());
    }
    size_t slot = 0;
    for (const TimelineArg& a : args) {
      if (int(slot) == skip) {
        ++slot;
        continue;
      }
      pb::DebugAnnotation* d = event->add_debug_annotations();
      d->set_name_iid(recent ? iid(seq, kKeys, a.key, recent->keys[slot], true) : iid(seq, kKeys, a.key));
      switch (a.type) {
        case TimelineArg::Type::kUnsigned: d->set_uint_value(a.u); break;
        case TimelineArg::Type::kSigned: d->set_int_value(a.s); break;
        case TimelineArg::Type::kText:
          if (a.repeats)
            d->set_string_value_iid(recent ? iid(seq, kValues, a.text(), recent->values[slot], a.lasting)
                                            : iid(seq, kValues, a.text()));
          else d->set_string_value(a.text().data(), a.text().size());
          break;
        case TimelineArg::Type::kTexts:
          for (const std::string& t : a.texts) d->add_array_values()->set_string_value(t);
          break;
        case TimelineArg::Type::kNumbers:
          for (int64_t v : a.numbers) d->add_array_values()->set_int_value(v);
          break;
      }
      ++slot;
    }
  }

  // A track event packet on the sequence of everything but calls.
  pb::TrackEvent* misc_event(pb::TrackEvent::Type type, uint64_t track, int64_t time_ns) {
    packet.Clear();
    packet.set_timestamp(clamp(time_ns));
    packet.set_trusted_packet_sequence_id(misc.id);
    if (type != pb::TrackEvent::TYPE_SLICE_END && type != pb::TrackEvent::TYPE_COUNTER)
      packet.set_sequence_flags(kNeedsIncrementalState);
    pb::TrackEvent* e = packet.mutable_track_event();
    e->set_type(type);
    e->set_track_uuid(track);
    return e;
  }

  void named_event(pb::TrackEvent* e, std::string_view name, std::string_view category, const TimelineArgs* args) {
    e->set_name_iid(iid(misc, kNames, name));
    if (!category.empty()) e->add_category_iids(iid(misc, kCategories, category));
    if (args) annotate(misc, e, *args);
  }

  void descriptor(uint64_t uuid, uint64_t parent) {
    packet.Clear();
    pb::TrackDescriptor* d = packet.mutable_track_descriptor();
    d->set_uuid(uuid);
    if (parent) d->set_parent_uuid(parent);
  }

  uint64_t process_track(uint32_t pid, const std::string* name = nullptr) {
    auto [it, added] = processes.try_emplace(pid, 0);
    if (added) it->second = next_uuid++;
    if (added || name) {
      descriptor(it->second, 0);
      pb::ProcessDescriptor* p = packet.mutable_track_descriptor()->mutable_process();
      p->set_pid(int32_t(pid));
      if (name) p->set_process_name(*name);
      write();
    }
    return it->second;
  }

  Thread& thread(uint32_t pid, uint32_t tid, const std::string* name = nullptr) {
    const uint64_t key = uint64_t(pid) << 32 | tid;
    // Calls come thread by thread in runs: the last thread is usually the one asked for.
    if (!name && last_thread && last_thread_key == key) return *last_thread;
    auto [it, added] = threads.try_emplace(key);
    Thread& t = it->second;
    last_thread_key = key;
    last_thread = &t;
    if (added) t.uuid = next_uuid++;
    if (added || name) {
      const uint64_t parent = process_track(pid);
      descriptor(t.uuid, parent);
      pb::ThreadDescriptor* d = packet.mutable_track_descriptor()->mutable_thread();
      d->set_pid(int32_t(pid));
      d->set_tid(tid);
      if (name) d->set_thread_name(*name);
      write();
    }
    return t;
  }

  // A track under a process or thread, named; `key` tells it from the parent's other tracks.
  uint64_t child_track(uint64_t parent, const std::string& key, std::string_view name, bool counter = false) {
    auto [it, added] = child_tracks.try_emplace(key, 0);
    if (!added) return it->second;
    it->second = next_uuid++;
    descriptor(it->second, parent);
    pb::TrackDescriptor* d = packet.mutable_track_descriptor();
    d->set_name(name.data(), name.size());
    if (counter) d->mutable_counter()->set_unit(pb::CounterDescriptor::UNIT_SIZE_BYTES);
    write();
    return it->second;
  }

  // A call packet of thread `t`: on its track by default, its time a delta on the thread's clock, or
  // absolute where it would go back (records out of order), which leaves the clock as it was.
  pb::TrackEvent* call_event(Thread& t, pb::TrackEvent::Type type, uint64_t time_ns) {
    if (t.calls.id == 0) start_call_sequence(t, time_ns);
    packet.Clear();
    if (time_ns >= t.clock) {
      packet.set_timestamp(time_ns - t.clock);
      t.clock = time_ns;
    } else {
      packet.set_timestamp(time_ns);
      packet.set_timestamp_clock_id(kTraceClock);
    }
    packet.set_trusted_packet_sequence_id(t.calls.id);
    // No SEQ_NEEDS_INCREMENTAL_STATE: the flag only asks a reader to drop the packet after a gap in
    // the sequence, which a file written in one go has none of; left out, a call is 4 bytes smaller.
    pb::TrackEvent* e = packet.mutable_track_event();
    e->set_type(type);
    return e;
  }

  void start_call_sequence(Thread& t, uint64_t time_ns) {
    t.calls.id = next_sequence++;
    t.clock = time_ns;
    packet.Clear();
    packet.set_trusted_packet_sequence_id(t.calls.id);
    packet.set_sequence_flags(kIncrementalStateCleared);
    packet.set_first_packet_on_sequence(true);
    pb::TracePacketDefaults* defaults = packet.mutable_trace_packet_defaults();
    defaults->set_timestamp_clock_id(kIncrementalClock);
    defaults->mutable_track_event_defaults()->set_track_uuid(t.uuid);
    // The incremental clock starts where the trace clock reads the thread's first call.
    pb::ClockSnapshot* clocks = packet.mutable_clock_snapshot();
    pb::ClockSnapshot::Clock* trace = clocks->add_clocks();
    trace->set_clock_id(kTraceClock);
    trace->set_timestamp(time_ns);
    pb::ClockSnapshot::Clock* incremental = clocks->add_clocks();
    incremental->set_clock_id(kIncrementalClock);
    incremental->set_timestamp(time_ns);
    incremental->set_is_incremental(true);
    write();
  }

  void end_call(Thread& t) {
    const uint64_t end = t.open.back().end;
    t.open.pop_back();
    if (t.calls.id != 0 && end >= t.clock) {
      const uint32_t event_size = varint_field_size(pb::TrackEvent::kTypeFieldNumber, pb::TrackEvent::TYPE_SLICE_END);
      CallPacket packet(*this, call_packet_size(end - t.clock, t.calls.id, event_size));
      packet.varint(pb::TracePacket::kTimestampFieldNumber, end - t.clock);
      packet.varint(pb::TracePacket::kTrustedPacketSequenceIdFieldNumber, t.calls.id);
      packet.message(pb::TracePacket::kTrackEventFieldNumber, event_size);
      packet.varint(pb::TrackEvent::kTypeFieldNumber, pb::TrackEvent::TYPE_SLICE_END);
      t.clock = end;
      packet.close();
      return;
    }
    call_event(t, pb::TrackEvent::TYPE_SLICE_END, end);
    write();
  }

  // The packets of calls, written field by field with protobuf's own encoding routines and the field
  // numbers protoc generated, without message objects (clearing, sizing and serialising those was
  // most of the export's time). Only what the writer knows the size of before it begins: a packet of
  // one track event, whose strings the sequence has interned and whose arguments are numbers or
  // interned or short strings; anything else goes through the messages.
  class CallPacket {
   public:
    // A packet of `size` bytes, sized beforehand so that its length goes first and nothing moves.
    CallPacket(State& state, uint32_t size) : state_(state) {
      p_ = state.room(size + kPacketHeadBytes);
      *p_++ = kPacketTag;
      p_ = Coded::WriteVarint32ToArray(size, p_);
      end_ = p_ + size;
    }
    void varint(int field, uint64_t v) {
      p_ = WireFormat::WriteUInt64ToArray(field, v, p_);
    }
    void fixed64(int field, uint64_t v) { p_ = WireFormat::WriteFixed64ToArray(field, v, p_); }
    void message(int field, uint32_t size) {
      p_ = WireFormat::WriteTagToArray(field, WireFormat::WIRETYPE_LENGTH_DELIMITED, p_);
      p_ = Coded::WriteVarint32ToArray(size, p_);
    }
    void bytes(int field, std::string_view s) {
      message(field, uint32_t(s.size()));
      p_ = Coded::WriteRawToArray(s.data(), int(s.size()), p_);
    }
    void close() {
      assert(p_ == end_ && "a call packet's fields disagree with its size");
      state_.used = size_t(p_ - state_.buf.data());
    }

   private:
    State& state_;
    uint8_t* p_;
    uint8_t* end_;
  };

  static uint32_t varint_field_size(int field, uint64_t v) {
    return uint32_t(Coded::VarintSize32(uint32_t(field) << 3) + Coded::VarintSize64(v));
  }
  static uint32_t message_field_size(int field, uint32_t size) {
    return uint32_t(Coded::VarintSize32(uint32_t(field) << 3 | 2) + Coded::VarintSize32(size)) + size;
  }
  // A call's packet: its time, its sequence and a track event of `event_size` bytes.
  static uint32_t call_packet_size(uint64_t delta, uint32_t sequence, uint32_t event_size) {
    return varint_field_size(pb::TracePacket::kTimestampFieldNumber, delta) +
           varint_field_size(pb::TracePacket::kTrustedPacketSequenceIdFieldNumber, sequence) +
           message_field_size(pb::TracePacket::kTrackEventFieldNumber, event_size);
  }

  // A call's begin packet through CallPacket, when it qualifies (see there); false: it did not.
  bool write_call_begin_directly(Thread& t, const TimelineSlice& s, uint64_t begin, uint64_t flow, ApiStrings& recent) {
    if (t.calls.id == 0 || begin < t.clock) return false;
    bool defined = true;
    const uint64_t name = known_iid(t.calls, kNames, s.name, recent.name, true, defined);
    const uint64_t category = known_iid(t.calls, kCategories, s.category, recent.category, true, defined);
    if (recent.keys.size() < s.args.size()) {
      recent.keys.resize(s.args.size());
      recent.values.resize(s.args.size());
    }
    // Each annotation: its name's iid and its value's field, sized first. Trivial, so that the array
    // is not initialised call after call.
    struct Field {
      uint64_t name_iid;
      uint64_t number;
      const char* text;
      uint32_t text_size;
      uint32_t size;
      int field;
    };
    Field fields[24];
    size_t n = 0;
    uint32_t event_size = varint_field_size(pb::TrackEvent::kTypeFieldNumber, pb::TrackEvent::TYPE_SLICE_BEGIN) +
                          varint_field_size(pb::TrackEvent::kNameIidFieldNumber, name) +
                          varint_field_size(pb::TrackEvent::kCategoryIidsFieldNumber, category);
    for (size_t slot = 0; slot < s.args.size(); ++slot) {
      if (int(slot) == s.numbering_arg) continue;
      const TimelineArg& a = s.args[slot];
      if (n == std::size(fields) - 1) return false;
      Field& f = fields[n++];
      f.name_iid = known_iid(t.calls, kKeys, a.key, recent.keys[slot], true, defined);
      switch (a.type) {
        case TimelineArg::Type::kUnsigned: f.field = pb::DebugAnnotation::kUintValueFieldNumber, f.number = a.u; break;
        case TimelineArg::Type::kSigned:
          f.field = pb::DebugAnnotation::kIntValueFieldNumber, f.number = uint64_t(a.s);
          break;
        case TimelineArg::Type::kText:
          if (a.repeats) {
            f.field = pb::DebugAnnotation::kStringValueIidFieldNumber;
            f.number = known_iid(t.calls, kValues, a.text(), recent.values[slot], a.lasting, defined);
          } else {
            const std::string_view text = a.text();
            if (text.size() > 256) return false;
            f.field = pb::DebugAnnotation::kStringValueFieldNumber;
            f.text = text.data();
            f.text_size = uint32_t(text.size());
          }
          break;
        default: return false;
      }
      f.size = varint_field_size(pb::DebugAnnotation::kNameIidFieldNumber, f.name_iid) +
               (f.field == pb::DebugAnnotation::kStringValueFieldNumber
                    ? message_field_size(f.field, f.text_size)
                    : varint_field_size(f.field, f.number));
      event_size += message_field_size(pb::TrackEvent::kDebugAnnotationsFieldNumber, f.size);
    }
    if (flow) {
      Field& f = fields[n++];
      f.name_iid = known_iid(t.calls, kKeys, "correlation", recent.correlation, true, defined);
      f.field = pb::DebugAnnotation::kUintValueFieldNumber;
      f.number = flow & 0xffffffffu;
      f.size = varint_field_size(pb::DebugAnnotation::kNameIidFieldNumber, f.name_iid) +
               varint_field_size(f.field, f.number);
      event_size += message_field_size(pb::TrackEvent::kDebugAnnotationsFieldNumber, f.size);
      event_size += uint32_t(Coded::VarintSize32(uint32_t(pb::TrackEvent::kFlowIdsFieldNumber) << 3)) + 8;
    }
    if (!defined) return false;  // the messages write the definitions
    CallPacket packet(*this, call_packet_size(begin - t.clock, t.calls.id, event_size));
    packet.varint(pb::TracePacket::kTimestampFieldNumber, begin - t.clock);
    packet.varint(pb::TracePacket::kTrustedPacketSequenceIdFieldNumber, t.calls.id);
    packet.message(pb::TracePacket::kTrackEventFieldNumber, event_size);
    packet.varint(pb::TrackEvent::kTypeFieldNumber, pb::TrackEvent::TYPE_SLICE_BEGIN);
    packet.varint(pb::TrackEvent::kNameIidFieldNumber, name);
    packet.varint(pb::TrackEvent::kCategoryIidsFieldNumber, category);
    for (size_t i = 0; i < n; ++i) {
      const Field& f = fields[i];
      packet.message(pb::TrackEvent::kDebugAnnotationsFieldNumber, f.size);
      packet.varint(pb::DebugAnnotation::kNameIidFieldNumber, f.name_iid);
      if (f.field == pb::DebugAnnotation::kStringValueFieldNumber) packet.bytes(f.field, {f.text, f.text_size});
      else packet.varint(f.field, f.number);
    }
    if (flow) packet.fixed64(pb::TrackEvent::kFlowIdsFieldNumber, flow);
    t.clock = begin;
    packet.close();
    return true;
  }

  void write_call(Thread& t, const TimelineSlice& s, uint64_t flow) {
    const uint64_t begin = clamp(s.begin_ns), end = std::max(begin, clamp(s.end_ns));
    // Close the calls this one is not inside.
    while (!t.open.empty() && (t.open.back().depth >= s.depth || end > t.open.back().end)) end_call(t);
    if (api_strings.size() <= s.api_id) api_strings.resize(s.api_id + 1);
    ApiStrings& recent = api_strings[s.api_id];
    if (write_call_begin_directly(t, s, begin, flow, recent)) {
      t.open.push_back({end, s.depth});
      return;
    }
    pb::TrackEvent* e = call_event(t, pb::TrackEvent::TYPE_SLICE_BEGIN, begin);
    e->set_name_iid(iid(t.calls, kNames, s.name, recent.name, true));
    e->add_category_iids(iid(t.calls, kCategories, s.category, recent.category, true));
    // The reader's numbering of calls joins nothing: a call given GPU work shows CUPTI's id, which its
    // work carries too (as nsys's CorrID), and the others none.
    annotate(t.calls, e, s.args, &recent, s.numbering_arg);
    if (flow) {
      pb::DebugAnnotation* d = e->add_debug_annotations();
      d->set_name_iid(iid(t.calls, kKeys, "correlation", recent.correlation, true));
      d->set_uint_value(flow & 0xffffffffu);
      e->add_flow_ids(flow);
    }
    write();
    t.open.push_back({end, s.depth});
  }

  void close_calls() {
    for (auto& [key, t] : threads)
      while (!t.open.empty()) end_call(t);
  }

  // Writes the thread's queued calls up to the first still waiting for its link.
  void drain(Thread& t) {
    while (!t.queue.empty() && t.decided.front()) {
      write_call(t, t.queue.front(), t.flows.front());
      t.queue.pop_front();
      t.flows.pop_front();
      t.decided.pop_front();
    }
  }

  // A call queued: it goes out at once unless it waits for its link or behind one that does.
  void queue_call(Thread& t, const TimelineSlice& slice) {
    if (t.queue.empty() && !slice.awaits_link) {
      write_call(t, slice, 0);
      return;
    }
    uint64_t flow = 0;
    bool decided = !slice.awaits_link;
    if (slice.awaits_link) {
      const uint64_t begin = clamp(slice.begin_ns), end = clamp(slice.end_ns);
      while (!t.early.empty() && t.early.front().time < begin) t.early.pop_front();  // earlier calls'
      for (auto it = t.early.begin(); it != t.early.end() && it->time <= end; ++it)
        if (it->api == slice.api_id) {
          flow = it->flow;
          decided = true;
          t.early.erase(it);
          break;
        }
    }
    t.queue.push_back(slice);
    t.flows.push_back(flow);
    t.decided.push_back(decided);
    // A thread whose links never come (CUPTI stopped) holds a bounded number of calls.
    if (t.queue.size() > kMaxQueued) t.decided.front() = true;
    drain(t);
  }

  // CUPTI's record of a call that gave the device work, at `time` inside the call of `api` on the
  // thread (inside a runtime call, the driver call it made has a link of its own, delivered first).
  // A call that ended before the link began gets none: CUPTI delivers a thread's records in order.
  void link(Thread& t, uint64_t time, uint32_t api, uint64_t flow) {
    bool used = false;
    for (size_t i = 0; i < t.queue.size() && clamp(t.queue[i].begin_ns) <= time; ++i) {
      if (t.decided[i]) continue;
      const TimelineSlice& s = t.queue[i];
      if (clamp(s.end_ns) < time) {
        t.decided[i] = true;
      } else if (!used && s.api_id == api) {
        t.flows[i] = flow;
        t.decided[i] = true;
        used = true;
      }
    }
    if (!used) {
      t.early.push_back({time, api, flow});
      if (t.early.size() > kMaxEarlyLinks) t.early.pop_front();
    }
    drain(t);
  }

  void release_queues() {
    for (auto& [key, t] : threads) {
      std::fill(t.decided.begin(), t.decided.end(), true);
      drain(t);
      t.early.clear();
    }
  }

  static constexpr size_t kMaxQueued = 1 << 18;
  static constexpr size_t kMaxEarlyLinks = 256;

  // Trace.packet's field header: field 1, length-delimited; then the packet's length, a varint.
  static constexpr uint8_t kPacketTag = 0x0a;
  static constexpr size_t kPacketHeadBytes = 6;

  FILE* out;
  // Packets are laid out here, then written in large pieces.
  std::vector<uint8_t> buf = std::vector<uint8_t>(size_t(1) << 18);
  size_t used = 0;
  pb::TracePacket packet;  // reused from packet to packet: Clear keeps what it allocated
  StringTable tables[kTables];
  Sequence misc;
  uint32_t next_sequence = 2;
  uint64_t next_uuid = 1;
  std::unordered_map<uint32_t, uint64_t> processes;  // pid -> track
  std::unordered_map<uint64_t, Thread> threads;      // pid << 32 | tid
  uint64_t last_thread_key = 0;
  Thread* last_thread = nullptr;  // threads' elements stay where they are
  std::unordered_map<std::string, uint64_t> child_tracks;
  std::unordered_map<std::string, std::vector<Lane>> lanes;
  std::vector<ApiStrings> api_strings;  // by api id  // per process and name: tracks of spans
};

ProtoSink::ProtoSink(FILE* out) : state_(std::make_unique<State>(out)) {}

ProtoSink::~ProtoSink() {
  end_of_trace();
  state_->flush();
}

void ProtoSink::name_process(uint32_t pid, const std::string& name) { state_->process_track(pid, &name); }

void ProtoSink::name_thread(uint32_t pid, uint32_t tid, const std::string& name) { state_->thread(pid, tid, &name); }

void ProtoSink::name_gpu_track(uint32_t pid, uint32_t track, const std::string& name) {
  State& s = *state_;
  s.child_track(s.process_track(pid), "gpu " + std::to_string(pid) + " " + std::to_string(track), name);
}

void ProtoSink::slice(uint32_t pid, uint32_t tid, const TimelineSlice& slice) {
  state_->queue_call(state_->thread(pid, tid), slice);
}

// A thread's push/pop ranges go on a track of their own under the thread, one per NVTX domain, as nsys
// shows them in rows apart from its calls. On the thread's track they would nest with its calls by
// the order they are written where a range and the first call inside it begin on the same
// nanosecond (a range is written when it ends, after that call, so it would be shown inside it); and
// each domain has a stack of its own, so ranges of two domains may overlap without nesting.
void ProtoSink::range(uint32_t pid, uint32_t tid, const TimelineSlice& r) {
  State& s = *state_;
  std::string_view domain;
  for (const TimelineArg& a : r.args)
    if (a.key == "domain" && a.type == TimelineArg::Type::kText) {
      domain = a.text();
      break;
    }
  std::string key = "nvtx " + std::to_string(pid) + " " + std::to_string(tid) + " ";
  key += domain;
  const uint64_t track = s.child_track(s.thread(pid, tid).uuid, key,
                                       domain.empty() ? std::string("NVTX") : "NVTX (" + std::string(domain) + ")");
  s.named_event(s.misc_event(pb::TrackEvent::TYPE_SLICE_BEGIN, track, r.begin_ns), r.name, r.category, &r.args);
  s.write();
  s.misc_event(pb::TrackEvent::TYPE_SLICE_END, track, std::max(r.begin_ns, r.end_ns));
  s.write();
}

void ProtoSink::gpu_slice(uint32_t pid, uint32_t track, const TimelineSlice& g, uint64_t flow) {
  State& s = *state_;
  const uint64_t uuid = s.child_tracks.at("gpu " + std::to_string(pid) + " " + std::to_string(track));
  pb::TrackEvent* e = s.misc_event(pb::TrackEvent::TYPE_SLICE_BEGIN, uuid, g.begin_ns);
  s.named_event(e, g.name, g.category, &g.args);
  if (flow) e->add_terminating_flow_ids(flow);
  s.write();
  s.misc_event(pb::TrackEvent::TYPE_SLICE_END, uuid, std::max(g.begin_ns, g.end_ns));
  s.write();
}

void ProtoSink::flow_start(uint32_t pid, uint32_t tid, int64_t time_ns, uint32_t api_id, uint64_t flow) {
  state_->link(state_->thread(pid, tid), clamp(time_ns), api_id, flow);
}

// Spans may overlap without nesting, which one track cannot show: each goes on the first track of its
// name whose spans all ended before it began, or on a new one of the same name.
void ProtoSink::async_slice(uint32_t pid, std::string_view track_name, std::string_view name, const char* category,
                            uint64_t, uint32_t, int64_t begin_ns, uint32_t, int64_t end_ns, const TimelineArgs& args) {
  State& s = *state_;
  const uint64_t process = s.process_track(pid);
  const std::string key = std::to_string(pid) + " " + std::string(track_name);
  std::vector<State::Lane>& lanes = s.lanes[key];
  const uint64_t begin = clamp(begin_ns), end = std::max(begin, clamp(end_ns));
  State::Lane* lane = nullptr;
  for (State::Lane& l : lanes)
    if (l.end <= begin) {
      lane = &l;
      break;
    }
  if (!lane) {
    lanes.push_back({s.child_track(process, "span " + key + " " + std::to_string(lanes.size()), track_name), 0});
    lane = &lanes.back();
  }
  lane->end = std::max(lane->end, end);
  const uint64_t uuid = lane->uuid;
  s.named_event(s.misc_event(pb::TrackEvent::TYPE_SLICE_BEGIN, uuid, int64_t(begin)), name, category, &args);
  s.write();
  s.misc_event(pb::TrackEvent::TYPE_SLICE_END, uuid, int64_t(end));
  s.write();
}

void ProtoSink::off_cpu(uint32_t pid, uint32_t tid, std::string_view name, int64_t begin_ns, int64_t end_ns) {
  State& s = *state_;
  const uint64_t uuid =
      s.child_track(s.thread(pid, tid).uuid, "off " + std::to_string(pid) + " " + std::to_string(tid), "off CPU");
  s.named_event(s.misc_event(pb::TrackEvent::TYPE_SLICE_BEGIN, uuid, begin_ns), name, "off_cpu", nullptr);
  s.write();
  s.misc_event(pb::TrackEvent::TYPE_SLICE_END, uuid, std::max(begin_ns, end_ns));
  s.write();
}

void ProtoSink::instant(uint32_t pid, uint32_t tid, std::string_view name, const char* category, int64_t time_ns,
                        const TimelineArgs& args) {
  State& s = *state_;
  const uint64_t track = s.thread(pid, tid).uuid;
  s.named_event(s.misc_event(pb::TrackEvent::TYPE_INSTANT, track, time_ns), name, category, &args);
  s.write();
}

void ProtoSink::counter(uint32_t pid, std::string_view name, std::string_view, int64_t time_ns, int64_t value) {
  State& s = *state_;
  const uint64_t uuid = s.child_track(s.process_track(pid), "counter " + std::to_string(pid) + " " + std::string(name),
                                      name, true);
  s.misc_event(pb::TrackEvent::TYPE_COUNTER, uuid, time_ns)->set_counter_value(value);
  s.write();
}

void ProtoSink::end_of_trace() {
  State& s = *state_;
  s.release_queues();
  s.close_calls();
  s.api_strings.clear();
  s.flush();
}

}  // namespace cutrace::exporting
