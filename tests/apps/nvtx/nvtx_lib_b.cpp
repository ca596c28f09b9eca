// The second shared object of nvtx_app: a domain of its own, a registered string, a named category,
// a coloured range with a payload, and a mark.
#include <nvtx3/nvToolsExt.h>

namespace {
nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("lib_b");
  return d;
}
nvtxStringHandle_t step_name() {
  static nvtxStringHandle_t s = nvtxDomainRegisterStringA(domain(), "b.step");
  return s;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void lib_b_step(int iteration) {
  static bool named = (nvtxDomainNameCategoryA(domain(), 7, "steps"), true);
  (void)named;
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff00ff00;
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = iteration;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = step_name();
  nvtxDomainRangePushEx(domain(), &a);
  nvtxEventAttributes_t m{};
  m.version = NVTX_VERSION;
  m.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  m.messageType = NVTX_MESSAGE_TYPE_ASCII;
  m.message.ascii = "b.mark";
  nvtxDomainMarkEx(domain(), &m);
  nvtxDomainRangePop(domain());
}
