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
  capture_origins_.insert(stream);
  open_captures_.fetch_add(1, std::memory_order_relaxed);
  return Status::kOk;
}

Status GraphRegistry::end_capture(StreamId stream, Graph** out) {
  Lock lock(mu_);
  auto it = capturing_.find(stream);
  if (it == capturing_.end()) return Status::kInvalidValue;
  Graph* g = it->second;
  *out = g;
  // The streams that joined the capture leave it with the one that began it.
  for (auto s = capturing_.begin(); s != capturing_.end();) {
    if (s->second != g) {
      ++s;
      continue;
    }
    capture_origins_.erase(s->first);
    s = capturing_.erase(s);
    open_captures_.fetch_sub(1, std::memory_order_relaxed);
  }
  for (auto e = capture_events_.begin(); e != capture_events_.end();) e = e->second == g ? capture_events_.erase(e) : ++e;
  return Status::kOk;
}

bool GraphRegistry::capture_event(StreamId stream, EventId event) {
  if (open_captures_.load(std::memory_order_relaxed) == 0) return false;
  Lock lock(mu_);
  auto it = capturing_.find(stream);
  if (it == capturing_.end()) return false;
  capture_events_[event] = it->second;
  return true;
}

bool GraphRegistry::join_capture(StreamId stream, EventId event) {
  if (open_captures_.load(std::memory_order_relaxed) == 0) return false;
  Lock lock(mu_);
  auto it = capture_events_.find(event);
  if (it == capture_events_.end()) return false;
  auto [joined, added] = capturing_.emplace(stream, it->second);
  if (added) open_captures_.fetch_add(1, std::memory_order_relaxed);
  // A stream already in this capture waits inside it; one in another capture cannot join this one.
  return joined->second == it->second;
}

bool GraphRegistry::capture_origin(StreamId stream) {
  Lock lock(mu_);
  return capture_origins_.count(stream) != 0;
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
  Graph* g = it->second;
  capturing_.erase(it);
  open_captures_.fetch_sub(1, std::memory_order_relaxed);
  // A stream that joined a capture leaves it; the one that began it takes the capture with it.
  if (capture_origins_.erase(stream) == 0) return;
  for (auto s = capturing_.begin(); s != capturing_.end();) {
    if (s->second != g) {
      ++s;
      continue;
    }
    s = capturing_.erase(s);
    open_captures_.fetch_sub(1, std::memory_order_relaxed);
  }
  for (auto e = capture_events_.begin(); e != capture_events_.end();) e = e->second == g ? capture_events_.erase(e) : ++e;
  graphs_.erase(g);
  delete g;
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

Status GraphRegistry::clone(Graph* graph, Graph** out) {
  if (out == nullptr) return Status::kInvalidValue;
  auto* copy = new Graph;
  Lock lock(mu_);
  if (graphs_.count(graph) == 0) {
    delete copy;
    return Status::kInvalidValue;
  }
  copy->id = ++next_graph_id_;
  std::unordered_map<uint64_t, uint64_t> new_ids;
  for (const GraphNode& n : graph->nodes) {
    GraphNode c = n;
    c.id = ++next_node_id_;
    c.cloned_from = n.id;
    new_ids[n.id] = c.id;
    for (uint64_t& d : c.dependencies) d = new_ids[d];  // dependencies come earlier in the graph
    copy->nodes.push_back(std::move(c));
  }
  graphs_.insert(copy);
  *out = copy;
  return Status::kOk;
}

GraphNode* GraphRegistry::find_in_clone(Graph* clone, const GraphNode* node) {
  Lock lock(mu_);
  if (graphs_.count(clone) == 0 || node == nullptr) return nullptr;
  for (GraphNode& n : clone->nodes)
    if (n.cloned_from == node->id) return &n;
  return nullptr;
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

Status GraphRegistry::set_exec_node(GraphExec* exec, const GraphNode* original, GraphNode replacement) {
  Lock lock(mu_);
  if (execs_.count(exec) == 0 || original == nullptr) return Status::kInvalidValue;
  for (GraphNode& n : exec->nodes) {
    if (n.id != original->id) continue;
    if (n.type != replacement.type) return Status::kInvalidValue;
    replacement.id = n.id;
    replacement.dependencies = std::move(n.dependencies);
    n = std::move(replacement);
    return Status::kOk;
  }
  return Status::kInvalidValue;
}

Status GraphRegistry::update_exec(GraphExec* exec, Graph* graph) {
  Lock lock(mu_);
  if (execs_.count(exec) == 0 || graphs_.count(graph) == 0 || exec->nodes.size() != graph->nodes.size())
    return Status::kInvalidValue;
  for (size_t i = 0; i < exec->nodes.size(); ++i)
    if (exec->nodes[i].type != graph->nodes[i].type) return Status::kInvalidValue;
  exec->nodes.assign(graph->nodes.begin(), graph->nodes.end());
  return Status::kOk;
}

void GraphRegistry::add_graph_allocation(void* address, uint64_t bytes, int device) {
  Lock lock(memory_mu_);
  allocations_[address] = GraphAllocation{bytes, device, false};
}

bool GraphRegistry::is_graph_allocation(const void* address) {
  Lock lock(memory_mu_);
  return allocations_.count(address) != 0;
}

namespace {
void note_use(GraphRegistry::MemoryUse& use, int64_t change) {
  use.used += change;
  use.used_high = std::max(use.used_high, use.used);
  use.reserved = std::max(use.reserved, use.used);
  use.reserved_high = std::max(use.reserved_high, use.reserved);
}
}  // namespace

void GraphRegistry::use_graph_allocation(const void* address) {
  Lock lock(memory_mu_);
  auto it = allocations_.find(address);
  if (it == allocations_.end() || it->second.in_use) return;
  it->second.in_use = true;
  note_use(memory_use_[it->second.device], int64_t(it->second.bytes));
}

void GraphRegistry::free_graph_allocation(const void* address) {
  Lock lock(memory_mu_);
  auto it = allocations_.find(address);
  if (it == allocations_.end() || !it->second.in_use) return;
  it->second.in_use = false;
  note_use(memory_use_[it->second.device], -int64_t(it->second.bytes));
}

GraphRegistry::MemoryUse GraphRegistry::graph_memory(int device) {
  Lock lock(memory_mu_);
  return memory_use_[device];
}

void GraphRegistry::trim_graph_memory(int device) {
  Lock lock(memory_mu_);
  MemoryUse& use = memory_use_[device];
  use.reserved = use.used;
}

void GraphRegistry::reset_graph_memory_high(int device, bool used, bool reserved) {
  Lock lock(memory_mu_);
  MemoryUse& use = memory_use_[device];
  if (used) use.used_high = use.used;
  if (reserved) use.reserved_high = use.reserved;
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
    if (listening && !n.empty && n.type != NodeType::kHost) {
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
