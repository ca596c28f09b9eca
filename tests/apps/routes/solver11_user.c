/* Makes a cuSOLVER dense handle and destroys it, through the libcusolver.so.11 it is linked to.
 * int solver11_user_run(void): the status of cusolverDnCreate, or of cusolverDnDestroy when that failed. */
#include <cusolverDn.h>

__attribute__((visibility("default"))) int solver11_user_run(void) {
  cusolverDnHandle_t handle;
  cusolverStatus_t status = cusolverDnCreate(&handle);
  if (status != CUSOLVER_STATUS_SUCCESS) return (int)status;
  return (int)cusolverDnDestroy(handle);
}
