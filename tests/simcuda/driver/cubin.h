// The kernels of a real module image, for cuModuleLoadData and cuLibraryLoadData: a fatbin
// container (what `nvcc -fatbin` writes) or a cubin (an ELF), as the real driver takes them.
#pragma once

#include <string>
#include <vector>

namespace simcuda::drv {

// The kernel names of the image's uncompressed cubins, in the order their sections appear; empty
// for an image of another kind (PTX alone, a compressed cubin), whose kernels the simulation cannot
// name without compiling it.
std::vector<std::string> image_kernels(const void* image);

}  // namespace simcuda::drv
