// What an MPI call's record says of its communication, for mpi_event_trace and the SQLite export's
// MPI tables: its kind as nsys sorts MPI calls (point to point, collective, start/wait, other) and the
// argument slots the annotations name (preload/annotations/mpi.toml).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "reader/trace_reader.h"

namespace cutrace::model {

// nsys's kinds, which name its tables (MPI_P2P_EVENTS, MPI_COLLECTIVES_EVENTS, MPI_START_WAIT_EVENTS,
// MPI_OTHER_EVENTS) and mpi_event_trace's Kind column.
enum class MpiKind : uint8_t { kPointToPoint, kCollective, kStartWait, kOther };

inline std::string_view mpi_kind_name(MpiKind kind) {
  switch (kind) {
    case MpiKind::kPointToPoint: return "p2p";
    case MpiKind::kCollective: return "coll";
    case MpiKind::kStartWait: return "startwait";
    case MpiKind::kOther: return "other";
  }
  return "other";
}

// By the function's name: sends, receives and probes are point to point; the collectives and their
// non-blocking forms are collective; completion calls are start/wait; the rest (setup, communicators,
// one-sided communication) other.
inline MpiKind mpi_kind(std::string_view name) {
  if (!name.starts_with("MPI_")) return MpiKind::kOther;
  std::string_view op = name.substr(4);
  for (std::string_view wait : {"Wait", "Test", "Start"})
    if (op.starts_with(wait)) return MpiKind::kStartWait;
  for (std::string_view p2p : {"Send", "Recv", "Isend", "Irecv", "Ssend", "Bsend", "Rsend", "Issend", "Ibsend",
                               "Irsend", "Sendrecv", "Probe", "Iprobe", "Mprobe", "Improbe", "Mrecv", "Imrecv"})
    if (op == p2p || (op.starts_with(p2p) && op[p2p.size()] == '_')) return MpiKind::kPointToPoint;
  // The non-blocking collectives are the blocking names with an I before them, lowercased:
  // MPI_Iallreduce is MPI_Allreduce's.
  const bool nonblocking = op.size() > 1 && op[0] == 'I' && op[1] >= 'a' && op[1] <= 'z';
  if (nonblocking) op.remove_prefix(1);
  for (std::string_view coll : {"Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Allgather",
                                "Allgatherv", "Scatter", "Scatterv", "Alltoall", "Alltoallv", "Alltoallw",
                                "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"}) {
    const char first = nonblocking ? char(coll[0] - 'A' + 'a') : coll[0];
    if (op.size() == coll.size() && op[0] == first && op.substr(1) == coll.substr(1)) return MpiKind::kCollective;
  }
  return MpiKind::kOther;
}

// The argument slots an MPI call's api has for each field, found once per api by the annotations'
// names (first found wins).
class MpiFields {
 public:
  enum Field : uint32_t { kComm, kCommSize, kTag, kPeer, kRoot, kDatatype, kSize, kSendSize, kRecvSize, kCount };

  struct Values {
    uint64_t value[kCount] = {};
    uint32_t present = 0;  // bit per Field
    bool has(Field f) const { return (present >> f) & 1; }
  };

  Values read(const reader::ApiCall& c) {
    const Slots& slots = slots_of(c);
    Values v;
    for (uint32_t k = 0; k < kCount; ++k) {
      if (slots.index[k] < 0 || uint32_t(slots.index[k]) >= c.arg_count) continue;
      v.value[k] = c.args[slots.index[k]];
      v.present |= 1u << k;
    }
    return v;
  }

 private:
  static constexpr const char* kSlotNames[kCount] = {"comm", "comm_size", "tag", "peer", "root", "datatype",
                                                     "bytes", "send_bytes", "recv_bytes"};
  struct Slots {
    int8_t index[kCount];
  };

  const Slots& slots_of(const reader::ApiCall& c) {
    if (c.api_id >= slots_.size()) slots_.resize(c.api_id + 1);
    std::optional<Slots>& s = slots_[c.api_id];
    if (!s) {
      s.emplace();
      for (uint32_t k = 0; k < kCount; ++k) {
        s->index[k] = -1;
        for (size_t a = 0; a < c.api->args.size() && s->index[k] < 0; ++a)
          if (c.api->args[a].name == kSlotNames[k]) s->index[k] = int8_t(a);
      }
    }
    return *s;
  }

  std::vector<std::optional<Slots>> slots_;
};

}  // namespace cutrace::model
