// CUDA arrays and texture and surface objects on the simulated runtime: the bytes every kind of array
// copy moves, the copies the real runtime refuses, and the handles and descriptors of texture and
// surface objects.
#include <cuda_runtime.h>  // with the typed C++ overloads
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "sim_kernels.h"

// The runtime still exports the deprecated array copies (cudaMemcpyToArray and the like), and
// programs still call them: the tests call them too.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace simcuda {
namespace {

// The value of element (x, y) of slice z: distinct everywhere, so a misplaced byte shows.
float pattern(size_t x, size_t y, size_t z) { return float(z * 10000 + y * 100 + x); }

std::vector<float> filled(size_t width, size_t height, size_t depth) {
  std::vector<float> v(width * height * depth);
  for (size_t z = 0; z < depth; ++z) {
    for (size_t y = 0; y < height; ++y) {
      for (size_t x = 0; x < width; ++x) v[(z * height + y) * width + x] = pattern(x, y, z);
    }
  }
  return v;
}

TEST(RuntimeArrays, TwoDimensionalCopiesRoundTripTheBytes) {
  constexpr size_t kWidth = 37, kHeight = 11;
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc<float>();
  cudaArray_t array = nullptr;
  size_t free_before, free_after, total;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&array, &channels, kWidth, kHeight), cudaSuccess);
  ASSERT_NE(array, nullptr);
  // The array's storage is device memory.
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, (kWidth * kHeight * sizeof(float) + 255) / 256 * 256);

  cudaChannelFormatDesc got{};
  cudaExtent extent{};
  unsigned flags = 99;
  ASSERT_EQ(cudaArrayGetInfo(&got, &extent, &flags, array), cudaSuccess);
  EXPECT_EQ(got.x, 32);
  EXPECT_EQ(got.y, 0);
  EXPECT_EQ(got.f, cudaChannelFormatKindFloat);
  EXPECT_EQ(extent.width, kWidth);
  EXPECT_EQ(extent.height, kHeight);
  EXPECT_EQ(extent.depth, 0u);
  EXPECT_EQ(flags, 0u);
  std::memset(&got, 0, sizeof got);
  ASSERT_EQ(cudaGetChannelDesc(&got, array), cudaSuccess);
  EXPECT_EQ(got.x, 32);

  // In from host rows padded to 48 floats, out to rows of exactly the width.
  constexpr size_t kPaddedRow = 48;
  std::vector<float> padded(kPaddedRow * kHeight, -1.0f);
  for (size_t y = 0; y < kHeight; ++y) {
    for (size_t x = 0; x < kWidth; ++x) padded[y * kPaddedRow + x] = pattern(x, y, 0);
  }
  ASSERT_EQ(cudaMemcpy2DToArray(array, 0, 0, padded.data(), kPaddedRow * sizeof(float), kWidth * sizeof(float),
                                kHeight, cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<float> out(kWidth * kHeight, 0.0f);
  ASSERT_EQ(cudaMemcpy2DFromArray(out.data(), kWidth * sizeof(float), array, 0, 0, kWidth * sizeof(float), kHeight,
                                  cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, filled(kWidth, kHeight, 1));

  // A 5 x 4 rectangle written at column 3, row 2 (offsets in bytes and rows), the rest unchanged.
  std::vector<float> patch(5 * 4);
  std::iota(patch.begin(), patch.end(), 0.5f);
  ASSERT_EQ(cudaMemcpy2DToArray(array, 3 * sizeof(float), 2, patch.data(), 5 * sizeof(float), 5 * sizeof(float), 4,
                                cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(out.data(), kWidth * sizeof(float), array, 0, 0, kWidth * sizeof(float), kHeight,
                                  cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t y = 0; y < kHeight; ++y) {
    for (size_t x = 0; x < kWidth; ++x) {
      const bool inside = x >= 3 && x < 8 && y >= 2 && y < 6;
      ASSERT_EQ(out[y * kWidth + x], inside ? patch[(y - 2) * 5 + (x - 3)] : pattern(x, y, 0)) << x << ", " << y;
    }
  }
  // The same rectangle read back alone, through device memory and another array.
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, patch.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArray(device, 5 * sizeof(float), array, 3 * sizeof(float), 2, 5 * sizeof(float), 4,
                                  cudaMemcpyDeviceToDevice),
            cudaSuccess);
  cudaArray_t copy = nullptr;
  ASSERT_EQ(cudaMallocArray(&copy, &channels, 5, 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArray(copy, 0, 0, device, 5 * sizeof(float), 5 * sizeof(float), 4,
                                cudaMemcpyDeviceToDevice),
            cudaSuccess);
  cudaArray_t second = nullptr;
  ASSERT_EQ(cudaMallocArray(&second, &channels, 5, 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DArrayToArray(second, 0, 0, copy, 0, 0, 5 * sizeof(float), 4), cudaSuccess);
  std::vector<float> back(patch.size(), 0.0f);
  ASSERT_EQ(cudaMemcpy2DFromArray(back.data(), 5 * sizeof(float), second, 0, 0, 5 * sizeof(float), 4,
                                  cudaMemcpyDefault),
            cudaSuccess);
  EXPECT_EQ(back, patch);

  // The deprecated copies run on through the rows: 7 floats from (column 2, row 1) of `copy`.
  std::vector<float> run(7);
  std::iota(run.begin(), run.end(), 100.0f);
  ASSERT_EQ(cudaMemcpyToArray(copy, 2 * sizeof(float), 1, run.data(), run.size() * sizeof(float),
                              cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<float> whole(5 * 4, 0.0f);
  ASSERT_EQ(cudaMemcpyFromArray(whole.data(), copy, 0, 0, whole.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_EQ(whole[i], i >= 7 && i < 14 ? run[i - 7] : patch[i]) << i;
  }
  ASSERT_EQ(cudaMemcpyArrayToArray(second, 0, 0, copy, 0, 0, whole.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpyFromArray(back.data(), second, 0, 0, back.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, whole);

  for (cudaArray_t a : {array, copy, second}) EXPECT_EQ(cudaFreeArray(a), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);
}

TEST(RuntimeArrays, LayeredAndCubemapArraysRoundTripThroughThreeDimensionalCopies) {
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
  struct Case {
    cudaExtent extent;
    unsigned flags;
  };
  for (const Case& c : {Case{make_cudaExtent(8, 5, 3), cudaArrayLayered}, Case{make_cudaExtent(4, 4, 6), cudaArrayCubemap},
                        Case{make_cudaExtent(6, 3, 4), cudaArrayDefault}}) {
    SCOPED_TRACE(c.flags);
    const cudaExtent e = c.extent;
    cudaArray_t array = nullptr;
    ASSERT_EQ(cudaMalloc3DArray(&array, &channels, e, c.flags), cudaSuccess);
    cudaExtent got{};
    unsigned flags = 0;
    ASSERT_EQ(cudaArrayGetInfo(nullptr, &got, &flags, array), cudaSuccess);
    EXPECT_EQ(got.depth, e.depth);
    EXPECT_EQ(flags, c.flags);

    // In from host memory whose rows are padded by 3 floats; the extent is in elements.
    const size_t row = e.width + 3;
    std::vector<float> padded(row * e.height * e.depth, -1.0f);
    const std::vector<float> dense = filled(e.width, e.height, e.depth);
    for (size_t i = 0; i < dense.size(); ++i) padded[(i / e.width) * row + i % e.width] = dense[i];
    cudaMemcpy3DParms in{};
    in.srcPtr = make_cudaPitchedPtr(padded.data(), row * sizeof(float), e.width, e.height);
    in.dstArray = array;
    in.extent = e;
    in.kind = cudaMemcpyHostToDevice;
    ASSERT_EQ(cudaMemcpy3D(&in), cudaSuccess);
    std::vector<float> out(dense.size(), 0.0f);
    cudaMemcpy3DParms back{};
    back.srcArray = array;
    back.dstPtr = make_cudaPitchedPtr(out.data(), e.width * sizeof(float), e.width, e.height);
    back.extent = e;
    back.kind = cudaMemcpyDeviceToHost;
    ASSERT_EQ(cudaMemcpy3D(&back), cudaSuccess);
    EXPECT_EQ(out, dense);

    // A 2 x 2 x 2 box from element (1, 1, layer 1) of the array, to (1, 0, 0) of a 4 x 3 x 2 buffer.
    std::vector<float> box(4 * 3 * 2, 0.0f);
    cudaMemcpy3DParms part{};
    part.srcArray = array;
    part.srcPos = make_cudaPos(1, 1, 1);
    part.dstPtr = make_cudaPitchedPtr(box.data(), 4 * sizeof(float), 4, 3);
    part.dstPos = make_cudaPos(1 * sizeof(float), 0, 0);  // bytes: the element of a pointer is a byte
    part.extent = make_cudaExtent(2, 2, 2);
    part.kind = cudaMemcpyDeviceToHost;
    ASSERT_EQ(cudaMemcpy3D(&part), cudaSuccess);
    for (size_t z = 0; z < 2; ++z) {
      for (size_t y = 0; y < 3; ++y) {
        for (size_t x = 0; x < 4; ++x) {
          const bool inside = x >= 1 && x < 3 && y < 2;
          ASSERT_EQ(box[(z * 3 + y) * 4 + x], inside ? pattern(x, y + 1, z + 1) : 0.0f) << x << y << z;
        }
      }
    }
    EXPECT_EQ(cudaFreeArray(array), cudaSuccess);
  }

  // Extents the documentation rules out.
  cudaArray_t refused = nullptr;
  EXPECT_EQ(cudaMalloc3DArray(&refused, &channels, make_cudaExtent(4, 5, 6), cudaArrayCubemap), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc3DArray(&refused, &channels, make_cudaExtent(4, 4, 5), cudaArrayCubemap), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc3DArray(&refused, &channels, make_cudaExtent(4, 4, 0), cudaArrayLayered), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc3DArray(&refused, &channels, make_cudaExtent(0, 4, 1), 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc3DArray(&refused, &channels, make_cudaExtent(4, 0, 2), 0), cudaErrorInvalidValue);
  const cudaChannelFormatDesc three = cudaCreateChannelDesc(8, 8, 8, 0, cudaChannelFormatKindUnsigned);
  EXPECT_EQ(cudaMallocArray(&refused, &three, 4, 4), cudaErrorInvalidChannelDescriptor);
  // Layered cubemaps have six faces a layer, and surface load-store is a flag like any other.
  ASSERT_EQ(cudaMalloc3DArray(&refused, &channels, make_cudaExtent(4, 4, 12),
                              cudaArrayCubemap | cudaArrayLayered | cudaArraySurfaceLoadStore),
            cudaSuccess);
  EXPECT_EQ(cudaFreeArray(refused), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeArrays, CopiesOutsideAnArrayAreRefused) {
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc<float>();
  cudaArray_t array = nullptr;
  ASSERT_EQ(cudaMallocArray(&array, &channels, 8, 4), cudaSuccess);
  std::vector<float> host(64, 1.0f);
  constexpr size_t kRow = 8 * sizeof(float);
  EXPECT_EQ(cudaMemcpy2DToArray(array, 0, 0, host.data(), kRow, kRow, 4, cudaMemcpyHostToDevice), cudaSuccess);
  // One byte too wide, one row too many, an offset pushing either past the edge.
  EXPECT_EQ(cudaMemcpy2DToArray(array, 0, 0, host.data(), kRow + 4, kRow + 1, 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DToArray(array, 0, 0, host.data(), kRow, kRow, 5, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DToArray(array, 4, 0, host.data(), kRow, kRow, 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DFromArray(host.data(), kRow, array, 0, 1, kRow, 4, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  // A width beyond the source's pitch is a pitch error, as for cudaMemcpy2D.
  EXPECT_EQ(cudaMemcpy2DToArray(array, 0, 0, host.data(), 4, kRow, 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpyToArray(array, 0, 0, host.data(), 32 * sizeof(float) + 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToArray(array, 4, 3, host.data(), kRow, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyFromArray(host.data(), array, 0, 5, 4, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(host.data(), kRow, 8, 4);
  p.dstArray = array;
  p.extent = make_cudaExtent(8, 4, 2);  // a 2D array has one slice
  p.kind = cudaMemcpyHostToDevice;
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  p.extent = make_cudaExtent(8, 4, 1);
  p.dstPos = make_cudaPos(1, 0, 0);  // one element past the row's end
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  p.dstPos = make_cudaPos(0, 0, 0);
  p.dstPtr = p.srcPtr;  // a side given twice
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  p.dstPtr = cudaPitchedPtr{};
  EXPECT_EQ(cudaMemcpy3D(&p), cudaSuccess);

  // An array is no allocation, and a freed array is no array.
  EXPECT_EQ(cudaFree(array), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeArray(array), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(array), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DToArray(array, 0, 0, host.data(), kRow, kRow, 1, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  cudaChannelFormatDesc desc;
  EXPECT_EQ(cudaGetChannelDesc(&desc, array), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeArray(nullptr), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeArrays, AsyncArrayCopiesKeepTheirStreamsOrder) {
  static const void* slow = test::register_kernel(30, "_Z20array_sleep_us_30000v");
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc<int>();
  cudaArray_t array = nullptr;
  ASSERT_EQ(cudaMallocArray(&array, &channels, 16, 16), cudaSuccess);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 256 * sizeof(int)), cudaSuccess);
  std::iota(pinned, pinned + 256, 7);
  ASSERT_EQ(cudaLaunchKernel(slow, dim3(1), dim3(32), nullptr, 0, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DToArrayAsync(array, 0, 0, pinned, 16 * sizeof(int), 16 * sizeof(int), 16,
                                     cudaMemcpyHostToDevice, s),
            cudaSuccess);
  // Behind a 30 ms kernel: queued, not done.
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  std::vector<int> out(256, 0);
  int* pinned_out = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned_out, 256 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy2DFromArrayAsync(pinned_out, 16 * sizeof(int), array, 0, 0, 16 * sizeof(int), 16,
                                       cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(std::equal(pinned, pinned + 256, pinned_out));
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned_out), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(array), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(RuntimeArrays, GraphCopyNodesReachArrays) {
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc<float>();
  cudaArray_t array = nullptr;
  ASSERT_EQ(cudaMalloc3DArray(&array, &channels, make_cudaExtent(4, 3, 2), cudaArrayLayered), cudaSuccess);
  const std::vector<float> in = filled(4, 3, 2);
  std::vector<float> out(in.size(), 0.0f);
  cudaGraph_t graph;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  cudaMemcpy3DParms to{};
  to.srcPtr = make_cudaPitchedPtr(const_cast<float*>(in.data()), 4 * sizeof(float), 4, 3);
  to.dstArray = array;
  to.extent = make_cudaExtent(4, 3, 2);
  to.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3DParms from{};
  from.srcArray = array;
  from.dstPtr = make_cudaPitchedPtr(out.data(), 4 * sizeof(float), 4, 3);
  from.extent = to.extent;
  from.kind = cudaMemcpyDeviceToHost;
  cudaGraphNode_t first, second;
  ASSERT_EQ(cudaGraphAddMemcpyNode(&first, graph, nullptr, 0, &to), cudaSuccess);
  ASSERT_EQ(cudaGraphAddMemcpyNode(&second, graph, &first, 1, &from), cudaSuccess);
  from.extent = make_cudaExtent(4, 3, 3);  // one layer too many
  cudaGraphNode_t refused;
  EXPECT_EQ(cudaGraphAddMemcpyNode(&refused, graph, nullptr, 0, &from), cudaErrorInvalidValue);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(out, in);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(array), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeTextures, TextureObjectsOverArraysAndPitchedMemory) {
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc<float>();
  cudaArray_t array = nullptr;
  ASSERT_EQ(cudaMallocArray(&array, &channels, 64, 32), cudaSuccess);
  cudaResourceDesc over_array{};
  over_array.resType = cudaResourceTypeArray;
  over_array.res.array.array = array;
  cudaTextureDesc sampling{};
  sampling.addressMode[0] = cudaAddressModeWrap;
  sampling.addressMode[1] = cudaAddressModeClamp;
  sampling.filterMode = cudaFilterModeLinear;
  sampling.readMode = cudaReadModeElementType;
  sampling.normalizedCoords = 1;
  cudaTextureObject_t on_array = 0;
  ASSERT_EQ(cudaCreateTextureObject(&on_array, &over_array, &sampling, nullptr), cudaSuccess);
  EXPECT_NE(on_array, 0u);

  float* pitched = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(reinterpret_cast<void**>(&pitched), &pitch, 64 * sizeof(float), 32), cudaSuccess);
  cudaResourceDesc over_pitched{};
  over_pitched.resType = cudaResourceTypePitch2D;
  over_pitched.res.pitch2D.devPtr = pitched;
  over_pitched.res.pitch2D.desc = channels;
  over_pitched.res.pitch2D.width = 64;
  over_pitched.res.pitch2D.height = 32;
  over_pitched.res.pitch2D.pitchInBytes = pitch;
  cudaTextureObject_t on_pitched = 0;
  ASSERT_EQ(cudaCreateTextureObject(&on_pitched, &over_pitched, &sampling, nullptr), cudaSuccess);
  EXPECT_NE(on_pitched, 0u);
  EXPECT_NE(on_pitched, on_array);

  // What was given comes back.
  cudaResourceDesc resource{};
  ASSERT_EQ(cudaGetTextureObjectResourceDesc(&resource, on_pitched), cudaSuccess);
  EXPECT_EQ(resource.resType, cudaResourceTypePitch2D);
  EXPECT_EQ(resource.res.pitch2D.devPtr, pitched);
  EXPECT_EQ(resource.res.pitch2D.pitchInBytes, pitch);
  EXPECT_EQ(resource.res.pitch2D.width, 64u);
  ASSERT_EQ(cudaGetTextureObjectResourceDesc(&resource, on_array), cudaSuccess);
  EXPECT_EQ(resource.resType, cudaResourceTypeArray);
  EXPECT_EQ(resource.res.array.array, array);
  cudaTextureDesc texture{};
  ASSERT_EQ(cudaGetTextureObjectTextureDesc(&texture, on_array), cudaSuccess);
  EXPECT_EQ(texture.addressMode[0], cudaAddressModeWrap);
  EXPECT_EQ(texture.addressMode[1], cudaAddressModeClamp);
  EXPECT_EQ(texture.filterMode, cudaFilterModeLinear);
  EXPECT_EQ(texture.normalizedCoords, 1);

  // The pitch must be a multiple of the device's texturePitchAlignment and hold a row; the memory
  // must be an allocation, the whole of it inside.
  int pitch_alignment = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&pitch_alignment, cudaDevAttrTexturePitchAlignment, 0), cudaSuccess);
  ASSERT_GT(pitch_alignment, 1);
  cudaTextureObject_t refused = 0;
  cudaResourceDesc bad = over_pitched;
  bad.res.pitch2D.pitchInBytes = 64 * sizeof(float) + pitch_alignment / 2;
  EXPECT_EQ(cudaCreateTextureObject(&refused, &bad, &sampling, nullptr), cudaErrorInvalidValue);
  bad.res.pitch2D.pitchInBytes = 32 * sizeof(float);
  EXPECT_EQ(cudaCreateTextureObject(&refused, &bad, &sampling, nullptr), cudaErrorInvalidValue);
  bad = over_pitched;
  bad.res.pitch2D.height = 33;
  EXPECT_EQ(cudaCreateTextureObject(&refused, &bad, &sampling, nullptr), cudaErrorInvalidValue);
  std::vector<float> host(64 * 32);
  bad = over_pitched;
  bad.res.pitch2D.devPtr = host.data();
  EXPECT_EQ(cudaCreateTextureObject(&refused, &bad, &sampling, nullptr), cudaErrorInvalidValue);
  bad = over_array;
  bad.res.array.array = reinterpret_cast<cudaArray_t>(host.data());
  EXPECT_EQ(cudaCreateTextureObject(&refused, &bad, &sampling, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaCreateTextureObject(&refused, &over_array, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(refused, 0u);

  // Linear memory, which has no view.
  cudaResourceDesc linear{};
  linear.resType = cudaResourceTypeLinear;
  linear.res.linear.devPtr = pitched;
  linear.res.linear.desc = channels;
  linear.res.linear.sizeInBytes = pitch * 32;
  cudaTextureObject_t on_linear = 0;
  ASSERT_EQ(cudaCreateTextureObject(&on_linear, &linear, &sampling, nullptr), cudaSuccess);
  cudaResourceViewDesc view{};
  view.format = cudaResViewFormatFloat1;
  view.width = 64;
  EXPECT_EQ(cudaCreateTextureObject(&refused, &linear, &sampling, &view), cudaErrorInvalidValue);

  for (cudaTextureObject_t t : {on_array, on_pitched, on_linear}) EXPECT_EQ(cudaDestroyTextureObject(t), cudaSuccess);
  EXPECT_EQ(cudaDestroyTextureObject(on_array), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetTextureObjectTextureDesc(&texture, on_array), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeArray(array), cudaSuccess);
  EXPECT_EQ(cudaFree(pitched), cudaSuccess);
  cudaGetLastError();
}

TEST(RuntimeTextures, SurfaceObjectsNeedArraysMadeForThem) {
  const cudaChannelFormatDesc channels = cudaCreateChannelDesc<uchar4>();
  cudaArray_t plain = nullptr, writable = nullptr;
  ASSERT_EQ(cudaMallocArray(&plain, &channels, 16, 16), cudaSuccess);
  ASSERT_EQ(cudaMallocArray(&writable, &channels, 16, 16, cudaArraySurfaceLoadStore), cudaSuccess);
  cudaResourceDesc resource{};
  resource.resType = cudaResourceTypeArray;
  resource.res.array.array = plain;
  cudaSurfaceObject_t surface = 0;
  EXPECT_EQ(cudaCreateSurfaceObject(&surface, &resource), cudaErrorInvalidValue);
  resource.res.array.array = writable;
  ASSERT_EQ(cudaCreateSurfaceObject(&surface, &resource), cudaSuccess);
  EXPECT_NE(surface, 0u);
  cudaResourceDesc got{};
  ASSERT_EQ(cudaGetSurfaceObjectResourceDesc(&got, surface), cudaSuccess);
  EXPECT_EQ(got.res.array.array, writable);
  // A surface is not a texture.
  EXPECT_EQ(cudaDestroyTextureObject(surface), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDestroySurfaceObject(surface), cudaSuccess);
  EXPECT_EQ(cudaDestroySurfaceObject(surface), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeArray(plain), cudaSuccess);
  EXPECT_EQ(cudaFreeArray(writable), cudaSuccess);
  cudaGetLastError();
}

}  // namespace
}  // namespace simcuda
