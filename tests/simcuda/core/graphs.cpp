#include "graphs.h"

#include <algorithm>

namespace simcuda {

Graph* GraphRegistry::create() {
  auto* g = new Graph;
  Lock lock(mu_);
  g->id = ++next_graph_id_;
  graphs_.insert(g);
  return g;
}

Status GraphRegistry::destroy(Graph* graph) {
  Lock lock(mu_);
  if (graphs_.count(graph) == 0) return Status::kInvalidValue;
  for (const auto& [stream, g] : capturing_)
    if (g == graph) return Status::kInvalidValue;
  graphs_.erase(graph);
  delete graph;
  return Status::kOk;
}

Status GraphRegistry::add_node(Graph* graph, GraphNode node, const void* const* dependencies, size_t count,
                               GraphNode** out) {
  if (out == nullptr || (count > 0 && dependencies == nullptr)) return Status::kInvalidValue;
  Lock lock(mu_);
  if (graphs_.count(graph) == 0) return Status::kInvalidValue;
  node.dependencies.clear();
  for (size_t i = 0; i < count; ++i) {
    auto owner = std::find_if(graph->nodes.begin(), graph->nodes.end(),
                              [&](const GraphNode& n) { return &n == dependencies[i]; });
    if (owner == graph->nodes.end()) return Status::kInvalidValue;  // not a node of this graph
    node.dependencies.push_back(owner->id);
  }
  node.id = ++next_node_id_;
  graph->nodes.push_back(std::move(node));
  *out = &graph->nodes.back();
  return Status::kOk;
}

Status GraphRegistry::nodes(Graph* graph, std::vector<GraphNode*>* out) {
  Lock lock(mu_);
  if (graphs_.count(graph) == 0) return Status::kInvalidValue;
  out->clear();
  for (GraphNode& n : graph->nodes) out->push_back(&n);
  return Status::kOk;
}

Status GraphRegistry::begin_capture(StreamId stream) {
  auto* g = new Graph;
  Lock lock(mu_);
  if (capturing_.count(stream) != 0) {
    delete g;
    return Status::kInvalidValue;
  }
  g->id = ++next_graph_id_;
  graphs_.insert(g);
  capturing_[stream] = g;
  open_captures_.fetch_add(1, std::memory_order_relaxed);
  return Status::kOk;
}

Status GraphRegistry::end_capture(StreamId stream, Graph** out) {
  Lock lock(mu_);
  auto it = capturing_.find(stream);
  if (it == capturing_.end()) return Status::kInvalidValue;
  *out = it->second;
  capturing_.erase(it);
  open_captures_.fetch_sub(1, std::memory_order_relaxed);
  return Status::kOk;
}

bool GraphRegistry::capturing(StreamId stream) {
  if (open_captures_.load(std::memory_order_relaxed) == 0) return false;
  Lock lock(mu_);
  return capturing_.count(stream) != 0;
}

Graph* GraphRegistry::capture_graph(StreamId stream) {
  if (open_captures_.load(std::memory_order_relaxed) == 0) return nullptr;
  Lock lock(mu_);
  auto it = capturing_.find(stream);
  return it == capturing_.end() ? nullptr : it->second;
}

void GraphRegistry::forget_stream(StreamId stream) {
  if (open_captures_.load(std::memory_order_relaxed) == 0) return;
  Lock lock(mu_);
  auto it = capturing_.find(stream);
  if (it == capturing_.end()) return;
  graphs_.erase(it->second);
  delete it->second;
  capturing_.erase(it);
  open_captures_.fetch_sub(1, std::memory_order_relaxed);
}

bool GraphRegistry::capture(StreamId stream, GraphNode node) {
  if (open_captures_.load(std::memory_order_relaxed) == 0) return false;
  Lock lock(mu_);
  auto it = capturing_.find(stream);
  if (it == capturing_.end()) return false;
  Graph& g = *it->second;
  node.dependencies.clear();
  if (!g.nodes.empty()) node.dependencies.push_back(g.nodes.back().id);
  node.id = ++next_node_id_;
  g.nodes.push_back(std::move(node));
  return true;
}

Status GraphRegistry::instantiate(Graph* graph, GraphExec** out) {
  if (out == nullptr) return Status::kInvalidValue;
  auto* x = new GraphExec;
  Lock lock(mu_);
  if (graphs_.count(graph) == 0) {
    delete x;
    return Status::kInvalidValue;
  }
  x->id = ++next_exec_id_;
  x->graph_id = graph->id;
  x->nodes.assign(graph->nodes.begin(), graph->nodes.end());
  execs_.insert(x);
  *out = x;
  return Status::kOk;
}

Status GraphRegistry::destroy_exec(GraphExec* exec) {
  Lock lock(mu_);
  if (execs_.erase(exec) == 0) return Status::kInvalidValue;
  delete exec;
  return Status::kOk;
}

Status GraphRegistry::launch(GraphExec* exec, StreamId stream) {
  std::vector<GraphNode> nodes;
  uint32_t graph_id;
  {
    Lock lock(mu_);
    if (execs_.count(exec) == 0) return Status::kInvalidValue;
    nodes = exec->nodes;
    graph_id = exec->graph_id;
  }
  const bool listening = activity::active();
  std::vector<Work> works;
  for (GraphNode& n : nodes) {
    Work work{n.empty ? OpKind::kEventRecord : n.kind, n.empty ? 0 : n.duration_ns, n.effect, nullptr};
    if (listening && !n.empty) {
      std::shared_ptr<activity::OpInfo> info = activity::new_op_info(n.info.type);
      const uint32_t runtime = info->runtime_correlation, driver = info->driver_correlation;
      *info = n.info;
      info->runtime_correlation = runtime;
      info->driver_correlation = driver;
      info->graph_id = graph_id;
      info->graph_node_id = n.id;
      work.info = std::move(info);
    }
    works.push_back(std::move(work));
  }
  if (works.empty()) return Status::kOk;
  // The launch's end, for a profiler: a zero-length operation queued with the nodes, after the last.
  // Queued at once, the nodes run back to back, so the launch began their summed time before it.
  if (listening) {
    std::shared_ptr<activity::OpInfo> info = activity::new_op_info(activity::OpType::kGraph);
    info->graph_id = graph_id;
    for (const Work& w : works) info->graph_nodes_ns += w.duration_ns;
    works.push_back(Work{OpKind::kEventRecord, 0, {}, std::move(info)});
  }
  if (Status s = timeline().submit_all(stream, std::move(works)); s != Status::kOk) return s;
  for (const GraphNode& n : nodes)
    if (n.kernel != nullptr) notify_launch(*n.kernel, n.duration_ns);
  return Status::kOk;
}

GraphRegistry& graphs() {
  static GraphRegistry* registry = new GraphRegistry;  // never destroyed: used until the last atexit
  return *registry;
}

}  // namespace simcuda
