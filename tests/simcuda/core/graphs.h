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
// launches, copies and sets issued to the stream become nodes of the graph being captured, each
// depending on the one before, and run nothing.
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

struct GraphNode {
  uint64_t id = 0;  // CUPTI's graphNodeId: process-wide, from 1; set by the registry
  OpKind kind = OpKind::kKernel;
  bool empty = false;  // an empty node: a dependency point that runs nothing
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

  Status instantiate(Graph* graph, GraphExec** out);
  Status destroy_exec(GraphExec* exec);
  // Queues the nodes on the stream; kInvalidValue for an unknown executable graph.
  Status launch(GraphExec* exec, StreamId stream);

  void prepare_fork() { mu_.lock(); }
  void parent_after_fork() { mu_.unlock(); }
  void child_after_fork() { mu_.reinit_in_child(); }

 private:
  Mutex mu_;
  std::unordered_set<Graph*> graphs_;
  std::unordered_set<GraphExec*> execs_;
  std::unordered_map<StreamId, Graph*> capturing_;  // by the stream capturing into it
  // Capturing streams, read without the lock on every launch, copy and set.
  std::atomic<uint32_t> open_captures_{0};
  uint32_t next_graph_id_ = 0;
  uint32_t next_exec_id_ = 0;
  uint64_t next_node_id_ = 0;
};

SIMCUDA_API GraphRegistry& graphs();

}  // namespace simcuda
