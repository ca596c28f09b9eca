// The kernels of a real module image, for cuModuleLoadData and cuLibraryLoadData: a fatbin
// container (what `nvcc -fatbin` writes) or a cubin (an ELF), as the real driver takes them.
#pragma once

#include <string>
#include <vector>

namespace simcuda::drv {

// The kernel names of the image's uncompressed cubins, in the order their sections appear, or of PTX
// text (its .entry directives); empty for an image of another kind (a compressed cubin), whose
// kernels the simulation cannot name.
std::vector<std::string> image_kernels(const void* image);

// The kernels PTX text of `size` bytes (or up to its NUL) declares: the names of its .entry directives.
std::vector<std::string> ptx_kernels(const char* text, size_t size);

}  // namespace simcuda::drv
