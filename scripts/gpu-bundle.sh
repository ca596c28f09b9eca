#!/usr/bin/env bash
# Packs what a GPU machine needs to check cutrace against a real driver, into one folder that travels
# with the working tree (default .gpu, which .git/info/exclude should name): the tools, the shims, the
# test programs and the benchmark from an existing build, stripped; libzstd and the other libraries the
# tools link, which such a machine may lack; the wheel of scripts/build-wheel.sh where one is in
# WHEEL_DIR (default dist); CUDA 12's runtime from the pinned wheels, and the CUDA 13.2 runtime and CUPTI that
# PyTorch 2.15 brings; scripts/gpu/cupti_probe.cu, built here
# against the toolkit's CUPTI; and eu-stack, for the stacks of a run that hangs. scripts/gpu-check.sh runs the checks there.
#
# usage: scripts/gpu-bundle.sh [BUILD_DIR=build] [BUNDLE_DIR=.gpu]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bundle=${2:-.gpu}
cuda=${CUDA_HOME:-/usr/local/cuda}

[[ -x $build/bin/cutrace ]] || { echo "gpu-bundle: $build/bin/cutrace is missing: build the project first" >&2; exit 1; }
rm -rf "$bundle"
mkdir -p "$bundle"/build/bin "$bundle"/build/lib "$bundle"/build/tests/bin "$bundle"/libs "$bundle"/cuda12/lib

for tool in cutrace cutrace-recorder cutrace-cupti-trial bench_overhead; do
  strip -o "$bundle/build/bin/$tool" "$build/bin/$tool"
done
for lib in "$build"/lib/libcutrace-*.so; do
  strip -o "$bundle/build/lib/$(basename "$lib")" "$lib"
done
# --pytorch's start-up hook, beside the shim where the launcher looks for it.
cp -r "$build/lib/cutrace-python" "$bundle/build/lib/"
# The programs keep their symbols: the backtrace test names their functions.
for app in sim_vector_add sim_vector_add_static sim_streams sim_threads sim_graphs sim_cublas two_runtimes backtrace_app cheap_calls; do
  cp "$build/tests/bin/$app" "$bundle/build/tests/bin/"
done

for lib in libzstd.so.1 libdw.so.1 libelf.so.1 libbz2.so.1.0 liblzma.so.5 libprotobuf-lite.so.32; do
  cp -L "$(ldconfig -p | awk -v n="$lib" '$1 == n && /x86-64/ {print $NF; exit}')" "$bundle/libs/$lib"
done
wheels=("${WHEEL_DIR:-dist}"/cutrace-*.whl)
if [[ -f ${wheels[0]} ]]; then
  mkdir -p "$bundle/wheel"
  cp "${wheels[-1]}" "$bundle/wheel/"
else
  echo "gpu-bundle: no wheel in ${WHEEL_DIR:-dist} (scripts/build-wheel.sh dist): the wheel step will be skipped" >&2
fi
cuda12_root=$(awk -F= '/^CUTRACE_CUDA12_ROOT:/ {print $2}' "$build/CMakeCache.txt")
if [[ -n $cuda12_root && -f $cuda12_root/lib/libcudart.so.12 ]]; then
  cp -L "$cuda12_root/lib/libcudart.so.12" "$bundle/cuda12/lib/"
fi

# PyTorch 2.15's CUDA 13.2 runtime and CUPTI (the tests' pinned wheels): the newer minor version on
# the machine's driver, where CUPTI 13.2 once crashed without one.
cuda13_2_root=$(awk -F= '/^CUTRACE_CUDA13_2_ROOT:/ {print $2}' "$build/CMakeCache.txt")
if [[ -n $cuda13_2_root && -f $cuda13_2_root/lib/libcupti.so.13 ]]; then
  mkdir -p "$bundle/cuda13.2/lib"
  cp -L "$cuda13_2_root/lib/libcudart.so.13" "$cuda13_2_root/lib/libcupti.so.13" "$bundle/cuda13.2/lib/"
fi

cupti_include=$(dirname "$(find "$cuda"/ -name cupti.h -path '*include*' | head -1)")
cupti_lib=$(find "$cuda"/ -name 'libcupti.so.13' | head -1)
"$cuda/bin/nvcc" -O2 -gencode arch=compute_75,code=compute_75 -gencode arch=compute_90,code=sm_90 \
  -I"$cupti_include" scripts/gpu/cupti_probe.cu -o "$bundle/cupti_probe" \
  -L"$(dirname "$cupti_lib")" -lcupti -Xlinker -rpath -Xlinker '$ORIGIN/libs'
cp -L "$cupti_lib" "$bundle/libs/"
# eu-stack (elfutils) prints the stacks of a run that hangs there, which the machine has no tool for.
if command -v eu-stack >/dev/null; then
  cp "$(command -v eu-stack)" "$bundle/"
else
  echo "gpu-bundle: eu-stack not found (apt-get install elfutils): a hung run will be killed without its stacks" >&2
fi
du -sh "$bundle"
