// A forked child gets the device as its parent left it and can keep using it (the real runtime
// cannot, but a tracer has to follow children that do, and tests fork freely).
#include <pthread.h>

#include "arrays.h"
#include "graphs.h"
#include "kernels.h"
#include "memory.h"
#include "timeline.h"

namespace simcuda {
namespace {

// The timeline first: an effect it waits for may free memory. Then the registry, which may call
// memory() with its lock held.
void prepare() {
  timeline().prepare_fork();
  graphs().prepare_fork();
  kernels().prepare_fork();
  arrays().prepare_fork();
  memory().prepare_fork();
}

void parent() {
  memory().parent_after_fork();
  arrays().parent_after_fork();
  kernels().parent_after_fork();
  graphs().parent_after_fork();
  timeline().parent_after_fork();
}

void child() {
  memory().child_after_fork();
  arrays().child_after_fork();
  kernels().child_after_fork();
  graphs().child_after_fork();
  timeline().child_after_fork();
}

__attribute__((constructor)) void register_fork_handlers() { pthread_atfork(prepare, parent, child); }

}  // namespace
}  // namespace simcuda
