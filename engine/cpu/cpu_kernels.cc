#include "engine/cpu/cpu_kernels.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace linserve {
namespace {

// Linux's request for a state component the kernel enables per process
// (asm/prctl.h; the tile data's component number is 18).
constexpr int kArchRequestComponentPermission = 0x1023;
constexpr int kTileDataComponent = 18;

// AMX: the CPU's tile, bfloat16 and int8 bits (CPUID leaf 7, EDX 24, 22,
// 25) and the operating system's saving of the tile state (XCR0 bits 17
// and 18). GCC 12's __builtin_cpu_supports does not know AMX.
bool CpuHasAmx() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned amx = (1u << 22) | (1u << 24) | (1u << 25);
  if ((edx & amx) != amx) return false;
  if (__get_cpuid_count(1, 0, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) {
    return false;  // no OSXSAVE: XCR0 cannot be read
  }
  uint32_t xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const uint32_t tiles = (1u << 17) | (1u << 18);
  return (xcr0_low & tiles) == tiles;
}

// Linux's permission for this process to use the tile data, granted once
// for every thread (before it, the first tile instruction faults). Asked
// only when the AMX family is chosen: a process with it needs signal stacks
// with room for the 8 KB of tile data.
bool GrantTileData() {
  return syscall(SYS_arch_prctl, kArchRequestComponentPermission, kTileDataComponent) == 0;
}

CpuKernels Supported() {
  if (__builtin_cpu_supports("avx512f")) {
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni") &&
                   CpuHasAmx()
               ? CpuKernels::kAmx
               : CpuKernels::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuKernels::kAvx2;
  return CpuKernels::kPortable;
}

}  // namespace

CpuKernels ChooseCpuKernels(const char* requested, CpuKernels supported) {
  // AMX only when named: its one-row bfloat16 product still reads the
  // weights at 0.7 to 0.9 of the AVX-512 loop's rate (bench/RESULTS.md), and
  // batch-1 decode must be no slower where it is the default.
  CpuKernels wanted = std::min(supported, CpuKernels::kAvx512);
  if (requested != nullptr) {
    if (std::strcmp(requested, "amx") == 0) wanted = CpuKernels::kAmx;
    if (std::strcmp(requested, "avx512") == 0) wanted = CpuKernels::kAvx512;
    if (std::strcmp(requested, "avx2") == 0) wanted = CpuKernels::kAvx2;
    if (std::strcmp(requested, "portable") == 0) wanted = CpuKernels::kPortable;
  }
  return static_cast<CpuKernels>(std::min(static_cast<int>(wanted), static_cast<int>(supported)));
}

CpuKernels ActiveCpuKernels() {
  static const CpuKernels active = [] {
    const char* requested = std::getenv("LINSERVE_CPU_KERNELS");
    CpuKernels chosen = ChooseCpuKernels(requested, Supported());
    if (chosen == CpuKernels::kAmx && !GrantTileData()) chosen = CpuKernels::kAvx512;
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

bool ActiveCpuHasAvx512() { return ActiveCpuKernels() >= CpuKernels::kAvx512; }

bool ActiveCpuHasAmx() { return ActiveCpuKernels() == CpuKernels::kAmx; }

bool ActiveCpuHasAvx512Bf16() {
  static const bool bf16 = ActiveCpuHasAvx512() && __builtin_cpu_supports("avx512bf16");
  return bf16;
}

bool ActiveCpuHasAvx512Vnni() {
  static const bool vnni = ActiveCpuHasAvx512() && __builtin_cpu_supports("avx512vnni") &&
                           __builtin_cpu_supports("avx512bw");
  return vnni;
}

const char* CpuKernelsName(CpuKernels kernels) {
  switch (kernels) {
    case CpuKernels::kAmx: return "amx";
    case CpuKernels::kAvx512: return "avx512";
    case CpuKernels::kAvx2: return "avx2";
    case CpuKernels::kPortable: return "portable";
  }
  return "portable";
}

}  // namespace linserve
