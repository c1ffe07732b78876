#include "engine/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace linserve {
namespace {

CpuKernels Supported() {
  if (__builtin_cpu_supports("avx512f")) return CpuKernels::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuKernels::kAvx2;
  return CpuKernels::kPortable;
}

}  // namespace

CpuKernels ChooseCpuKernels(const char* requested, CpuKernels supported) {
  CpuKernels wanted = supported;
  if (requested != nullptr) {
    if (std::strcmp(requested, "avx512") == 0) wanted = CpuKernels::kAvx512;
    if (std::strcmp(requested, "avx2") == 0) wanted = CpuKernels::kAvx2;
    if (std::strcmp(requested, "portable") == 0) wanted = CpuKernels::kPortable;
  }
  return static_cast<CpuKernels>(std::min(static_cast<int>(wanted), static_cast<int>(supported)));
}

CpuKernels ActiveCpuKernels() {
  static const CpuKernels active = [] {
    const char* requested = std::getenv("LINSERVE_CPU_KERNELS");
    const CpuKernels chosen = ChooseCpuKernels(requested, Supported());
    if (requested != nullptr && *requested != '\0' && std::strcmp(requested, "auto") != 0 &&
        std::strcmp(requested, CpuKernelsName(chosen)) != 0) {
      // Said once, on stderr: the engine has no logger of its own.
      std::fprintf(stderr, "linserve: LINSERVE_CPU_KERNELS=%s; running the %s kernels\n",
                   requested, CpuKernelsName(chosen));
    }
    return chosen;
  }();
  return active;
}

bool ActiveCpuHasAvx512Bf16() {
  static const bool bf16 = ActiveCpuKernels() == CpuKernels::kAvx512 &&
                           __builtin_cpu_supports("avx512bf16");
  return bf16;
}

bool ActiveCpuHasAvx512Vnni() {
  static const bool vnni = ActiveCpuKernels() == CpuKernels::kAvx512 &&
                           __builtin_cpu_supports("avx512vnni") &&
                           __builtin_cpu_supports("avx512bw");
  return vnni;
}

const char* CpuKernelsName(CpuKernels kernels) {
  switch (kernels) {
    case CpuKernels::kAvx512: return "avx512";
    case CpuKernels::kAvx2: return "avx2";
    case CpuKernels::kPortable: return "portable";
  }
  return "portable";
}

}  // namespace linserve
