// CUDA graphs on the simulated device, shared by the runtime and the driver as the real stack shares
// one graph object model: graphs built node by node or captured from a stream, instantiated, and
// launched into a stream.
//
// Timing model (simcuda.h): a launch queues the graph's nodes on the stream, one after another in the
// order they were added (always an order their dependencies allow), each with its own duration, so
// a launch takes the sum of its nodes' times; an empty node takes none. While a profiler listens,
// each node's operation carries the graph's id and the node's id (CUPTI's graphId and graphNodeId),
// and a zero-length operation queued with them, after the last node, tells the profiler that the
// launch ended (CUPTI's GRAPH_TRACE record: from the first node's start to the last node's end). The
// nodes and that operation are queued as of one moment (Timeline::submit_all), so they run back to
// back however long queuing them takes.
//
// Capture: between cudaStreamBeginCapture and cudaStreamEndCapture (or the driver's), the kernel
// launches, copies, sets, host functions and stream-ordered allocations and frees issued to the
// stream become nodes of the graph being captured, each depending on the one before, and run
// nothing. An event recorded in a capturing stream marks the capture; another stream that waits for
// it joins the same capture (CUDA's fork and join across streams), its work added after the graph's
// last node, and the capture ends for every stream that joined it when its first stream ends it.
//
// Graph memory: an allocation node's address is assigned when the node is added and stays the
// node's for every launch (as CUDA keeps it); the bytes count as used from the node's run to the
// free node's run (or a cudaFree/cudaFreeAsync of the address outside the graph), and stay reserved
// until cudaDeviceGraphMemTrim, as the device's graph memory pool keeps them.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "activity.h"
#include "config.h"
#include "kernels.h"
#include "sync.h"
#include "timeline.h"

namespace simcuda {

// CUDA's node types that the simulation builds (cudaGraphNodeType, CUgraphNodeType).
enum class NodeType : uint8_t { kKernel, kMemcpy, kMemset, kHost, kEmpty, kMemAlloc, kMemFree };

struct GraphNode {
  uint64_t id = 0;  // CUPTI's graphNodeId: process-wide, from 1; set by the registry
  NodeType type = NodeType::kKernel;
  OpKind kind = OpKind::kKernel;
  bool empty = false;  // runs nothing on the device (empty nodes; memory nodes keep only their count)
  // Memory nodes: the address, its size and device.
  void* address = nullptr;
  uint64_t bytes = 0;
  int device = 0;
  uint64_t cloned_from = 0;  // the id of the node this one is a clone of
  uint64_t duration_ns = 0;
  std::function<void()> effect;
  // What a profiler is told of the node's operation (type, kernel name and shape, bytes, memory).
  activity::OpInfo info;
  const Kernel* kernel = nullptr;  // kernel nodes: for the launch observer
  std::vector<uint64_t> dependencies;  // ids of nodes of the same graph
};

struct Graph {
  uint32_t id = 0;  // CUPTI's graphId: process-wide, from 1
  std::deque<GraphNode> nodes;  // a deque: a node's address is its handle, and stays valid
};

struct GraphExec {
  uint32_t id = 0;
  uint32_t graph_id = 0;  // the graph it was instantiated from
  std::vector<GraphNode> nodes;
};

// Lock order: the registry's lock is never held while the timeline is called.
class SIMCUDA_API GraphRegistry {
 public:
  Graph* create();
  // kInvalidValue for an unknown graph (also one still being captured).
  Status destroy(Graph* graph);
  // Adds a node after the given dependencies (nodes of the same graph); *out is its handle.
  Status add_node(Graph* graph, GraphNode node, const void* const* dependencies, size_t count, GraphNode** out);
  // The graph's nodes in the order they were added; kInvalidValue for an unknown graph.
  Status nodes(Graph* graph, std::vector<GraphNode*>* out);

  // kInvalidValue if the stream is already capturing.
  Status begin_capture(StreamId stream);
  // The captured graph; kInvalidValue if the stream is not capturing.
  Status end_capture(StreamId stream, Graph** out);
  bool capturing(StreamId stream);
  // The graph the stream is capturing into, or nullptr.
  Graph* capture_graph(StreamId stream);
  // The stream is being destroyed: a capture it had open ends, and its graph with it.
  void forget_stream(StreamId stream);
  // Adds the work as the stream's next node if it is capturing (returns true), else does nothing.
  bool capture(StreamId stream, GraphNode node);

  // The stream is capturing: the event marks its capture (true); else nothing (false).
  bool capture_event(StreamId stream, EventId event);
  // The event marks a capture still open: the stream joins it (true); else nothing (false).
  bool join_capture(StreamId stream, EventId event);
  // Whether the stream began the capture it is in (false: it joined one, or captures nothing).
  bool capture_origin(StreamId stream);

  // A copy of the graph, node for node, with new node ids, each remembering the node it copies.
  Status clone(Graph* graph, Graph** out);
  // The copy of `node` (a node of the graph `clone` was made from) in `clone`, or nullptr.
  GraphNode* find_in_clone(Graph* clone, const GraphNode* node);

  Status instantiate(Graph* graph, GraphExec** out);
  Status destroy_exec(GraphExec* exec);
  // The node the executable graph holds for the graph node `original` is replaced by `replacement`
  // of the same type; kInvalidValue if it holds none, or of another type.
  Status set_exec_node(GraphExec* exec, const GraphNode* original, GraphNode replacement);
  // The executable graph takes the nodes of `graph`, which must have its nodes' types in its order
  // (CUDA's rules, simplified to what the simulation models); kInvalidValue otherwise.
  Status update_exec(GraphExec* exec, Graph* graph);
  // Queues the nodes on the stream; kInvalidValue for an unknown executable graph.
  Status launch(GraphExec* exec, StreamId stream);

  // Graph memory (see above). The address was assigned to an allocation node.
  void add_graph_allocation(void* address, uint64_t bytes, int device);
  bool is_graph_allocation(const void* address);
  // An allocation node ran: its bytes are used.
  void use_graph_allocation(const void* address);
  // The address is freed now (a free node ran, or the program freed it outside the graph).
  void free_graph_allocation(const void* address);
  struct MemoryUse {
    uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0;
  };
  MemoryUse graph_memory(int device);
  // cudaDeviceGraphMemTrim: the reserved bytes no allocation uses go back; the high marks may be reset.
  void trim_graph_memory(int device);
  void reset_graph_memory_high(int device, bool used, bool reserved);

  void prepare_fork() {
    mu_.lock();
    memory_mu_.lock();
  }
  void parent_after_fork() {
    memory_mu_.unlock();
    mu_.unlock();
  }
  void child_after_fork() {
    mu_.reinit_in_child();
    memory_mu_.reinit_in_child();
  }

 private:
  Mutex mu_;
  std::unordered_set<Graph*> graphs_;
  std::unordered_set<GraphExec*> execs_;
  std::unordered_map<StreamId, Graph*> capturing_;  // by the stream capturing into it
  std::unordered_set<StreamId> capture_origins_;    // the streams that began a capture
  std::unordered_map<EventId, Graph*> capture_events_;  // events recorded in a capturing stream
  struct GraphAllocation {
    uint64_t bytes = 0;
    int device = 0;
    bool in_use = false;
  };
  // Taken alone (memory nodes take it on the device thread as they run).
  Mutex memory_mu_;
  std::unordered_map<const void*, GraphAllocation> allocations_;
  std::unordered_map<int, MemoryUse> memory_use_;
  // Capturing streams, read without the lock on every launch, copy and set.
  std::atomic<uint32_t> open_captures_{0};
  uint32_t next_graph_id_ = 0;
  uint32_t next_exec_id_ = 0;
  uint64_t next_node_id_ = 0;
};

SIMCUDA_API GraphRegistry& graphs();

}  // namespace simcuda
