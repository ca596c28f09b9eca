// cutrace-cupti-trial DRIVER CUPTI: starts CUPTI beside a CUDA driver in a process of its own, so that
// the shim learns whether it can do so in the program's process without crashing or hanging it.
// Some CUPTI builds cannot work with a driver they do not recognise and recurse until their stack
// overflows inside cuptiSubscribe (CUPTI 13.2 beside a driver that is not NVIDIA's, as the
// simulated one), which no caller can catch. The shim runs this first (preload/cupti_trial.h) and
// loads CUPTI only where it returned.
//
// Exit status: 0 when cuptiSubscribe returned, whatever its result (a CUPTI that fails cleanly is
// the shim's to report); 3 when the driver or CUPTI could not be loaded or the driver did not
// initialise (no verdict: the program's process may still differ); 2 for a bad command line. A
// crash or a hang is the verdict against CUPTI.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <signal.h>

namespace {

void CUPTIAPI ignore(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

template <class Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

int main(int argc, char** argv) {
  // The shim starts this with every signal blocked, so that none reaches the program's handlers
  // before the exec.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (argc != 3) return 2;
  void* driver = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  auto init = driver ? symbol<CUresult (*)(unsigned)>(driver, "cuInit") : nullptr;
  if (init == nullptr || init(0) != CUDA_SUCCESS) return 3;
  void* cupti = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (cupti == nullptr) return 3;
  auto subscribe = symbol<decltype(&cuptiSubscribe)>(cupti, "cuptiSubscribe");
  auto unsubscribe = symbol<decltype(&cuptiUnsubscribe)>(cupti, "cuptiUnsubscribe");
  auto enable = symbol<decltype(&cuptiActivityEnable)>(cupti, "cuptiActivityEnable");
  auto disable = symbol<decltype(&cuptiActivityDisable)>(cupti, "cuptiActivityDisable");
  if (!subscribe || !unsubscribe || !enable || !disable) return 3;
  CUpti_SubscriberHandle subscriber = nullptr;
  if (subscribe(&subscriber, ignore, nullptr) == CUPTI_SUCCESS) {
    if (enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS) disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    unsubscribe(subscriber);
  }
  return 0;
}
