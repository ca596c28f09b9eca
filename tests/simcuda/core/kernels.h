// Modules, kernels and module variables, as nvcc-generated code registers them at start-up
// (__cudaRegisterFatBinary, __cudaRegisterFunction, __cudaRegisterVar, __cudaRegisterManagedVar).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config.h"
#include "sync.h"

namespace simcuda {

struct Kernel {
  std::string name;  // the device function's mangled name
  const void* host_function = nullptr;
  uint64_t duration_ns = 0;
  bool loaded = true;  // false once its module is unregistered
};

struct Symbol {
  void* device_ptr = nullptr;
  size_t size = 0;
};

// Lock order: the registry's lock may be held while memory() is called, never the reverse.
class SIMCUDA_API KernelRegistry {
 public:
  // Returns the module handle nvcc-generated code keeps and passes to the other calls.
  void** register_module(const void* fatbin);
  void unregister_module(void** module);
  void register_function(void** module, const void* host_function, const char* device_name);
  void register_variable(void** module, const void* host_var, size_t size);
  void register_managed_variable(void** module, void** host_pointer, size_t size);
  // Allocates the module's managed variables and points their host pointers at them.
  bool init_module(void** module);

  // A loaded kernel by its host stub or by the handle handed out for it (Kernel*, which serves as
  // cudaKernel_t and cudaFunction_t), else nullptr.
  const Kernel* find(const void* function_or_handle);
  // A kernel handle (loaded or not): the pointer itself, if it is one.
  const Kernel* find_handle(const void* handle);
  // A loaded module variable by the address of its host shadow.
  std::optional<Symbol> find_symbol(const void* host_var);

  void prepare_fork() { mu_.lock(); }
  void parent_after_fork() { mu_.unlock(); }
  void child_after_fork() { mu_.reinit_in_child(); }

 private:
  struct ManagedVariable {
    void** host_pointer;
    size_t size;
    void* storage = nullptr;
  };
  struct Module {
    void* handle_slot = nullptr;  // the handle is the address of this slot
    std::vector<Kernel*> kernels;
    std::vector<const void*> variables;  // host shadows
    std::vector<ManagedVariable> managed;
  };

  Module* module_locked(void** handle);

  Mutex mu_;
  std::unordered_map<void**, std::unique_ptr<Module>> modules_;
  // Kernels are never freed, so a stale handle can be recognised and never aliases a new kernel.
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::unordered_map<const void*, Kernel*> by_host_function_;
  std::unordered_map<const void*, Kernel*> by_handle_;
  std::unordered_map<const void*, Symbol> symbols_;  // by host shadow address
};

SIMCUDA_API KernelRegistry& kernels();

// Every kernel the device queues (not those captured into a graph, but each replay of them), in
// submission order, for tests that check which kernels a library call launched. At most one
// observer; nullptr removes it. It runs on the launching thread and must not call CUDA.
using LaunchObserver = void (*)(const Kernel& kernel, uint64_t duration_ns);
SIMCUDA_API void observe_launches(LaunchObserver observer);
SIMCUDA_API void notify_launch(const Kernel& kernel, uint64_t duration_ns);

}  // namespace simcuda
