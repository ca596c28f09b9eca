#include "kernels.h"

#include <atomic>
#include <cstring>

#include "memory.h"
#include "simcuda.h"

namespace simcuda {

KernelRegistry::Module* KernelRegistry::module_locked(void** handle) {
  auto it = modules_.find(handle);
  return it == modules_.end() ? nullptr : it->second.get();
}

void** KernelRegistry::register_module(const void* fatbin) {
  auto m = std::make_unique<Module>();
  m->handle_slot = const_cast<void*>(fatbin);
  void** handle = &m->handle_slot;
  Lock lock(mu_);
  modules_[handle] = std::move(m);
  return handle;
}

void KernelRegistry::unregister_module(void** handle) {
  std::vector<void*> storage;
  {
    Lock lock(mu_);
    auto it = modules_.find(handle);
    if (it == modules_.end()) return;
    Module& m = *it->second;
    for (Kernel* k : m.kernels) {
      k->loaded = false;
      auto h = by_host_function_.find(k->host_function);
      if (h != by_host_function_.end() && h->second == k) by_host_function_.erase(h);
    }
    for (const void* v : m.variables) {
      auto s = symbols_.find(v);
      if (s != symbols_.end()) {
        storage.push_back(s->second.device_ptr);
        symbols_.erase(s);
      }
    }
    for (ManagedVariable& mv : m.managed) {
      if (mv.storage != nullptr) storage.push_back(mv.storage);
    }
    modules_.erase(it);
  }
  for (void* p : storage) memory().release_module_storage(p);
}

void KernelRegistry::register_function(void** handle, const void* host_function,
                                       const char* device_name) {
  auto k = std::make_unique<Kernel>();
  k->name = device_name != nullptr ? device_name : "";
  k->host_function = host_function;
  k->duration_ns = kernel_duration_ns(k->name.c_str(), config().kernel_ns);
  Lock lock(mu_);
  Module* m = module_locked(handle);
  if (m == nullptr) return;
  Kernel* raw = k.get();
  kernels_.push_back(std::move(k));
  m->kernels.push_back(raw);
  by_host_function_[host_function] = raw;
  by_handle_[raw] = raw;
}

void KernelRegistry::register_variable(void** handle, const void* host_var, size_t size) {
  Lock lock(mu_);
  Module* m = module_locked(handle);
  // With no device there is nowhere to put the variable; symbol calls then fail as unknown.
  if (m == nullptr || size == 0 || config().device_count == 0) return;
  void* storage = nullptr;
  if (memory().allocate(MemoryKind::kDevice, 0, size, 0, &storage, /*module_owned=*/true) !=
      Status::kOk) {
    return;
  }
  // Initialised from the host shadow, as the module image would initialise the device copy.
  std::memcpy(storage, host_var, size);
  m->variables.push_back(host_var);
  symbols_[host_var] = Symbol{storage, size};
}

void KernelRegistry::register_managed_variable(void** handle, void** host_pointer, size_t size) {
  Lock lock(mu_);
  Module* m = module_locked(handle);
  if (m != nullptr) m->managed.push_back(ManagedVariable{host_pointer, size});
}

bool KernelRegistry::init_module(void** handle) {
  Lock lock(mu_);
  Module* m = module_locked(handle);
  if (m == nullptr) return false;
  for (ManagedVariable& mv : m->managed) {
    if (mv.storage != nullptr) continue;
    if (memory().allocate(MemoryKind::kManaged, 0, mv.size, 0, &mv.storage, true) != Status::kOk ||
        mv.storage == nullptr) {
      return false;
    }
    std::memset(mv.storage, 0, mv.size);
    *mv.host_pointer = mv.storage;
  }
  return true;
}

const Kernel* KernelRegistry::find(const void* function_or_handle) {
  Lock lock(mu_);
  auto it = by_host_function_.find(function_or_handle);
  if (it != by_host_function_.end()) return it->second;
  auto h = by_handle_.find(function_or_handle);
  if (h != by_handle_.end() && h->second->loaded) return h->second;
  return nullptr;
}

const Kernel* KernelRegistry::find_handle(const void* handle) {
  Lock lock(mu_);
  auto h = by_handle_.find(handle);
  return h == by_handle_.end() ? nullptr : h->second;
}

std::optional<Symbol> KernelRegistry::find_symbol(const void* host_var) {
  Lock lock(mu_);
  auto it = symbols_.find(host_var);
  if (it == symbols_.end()) return std::nullopt;
  return it->second;
}

namespace {
std::atomic<LaunchObserver> g_launch_observer{nullptr};
}  // namespace

void observe_launches(LaunchObserver observer) { g_launch_observer.store(observer); }

void notify_launch(const Kernel& kernel, uint64_t duration_ns) {
  if (LaunchObserver o = g_launch_observer.load(std::memory_order_acquire)) o(kernel, duration_ns);
}

KernelRegistry& kernels() {
  static KernelRegistry* r = new KernelRegistry;
  return *r;
}

}  // namespace simcuda
