#ifndef LINSERVE_ENGINE_CPU_KERNELS_H_
#define LINSERVE_ENGINE_CPU_KERNELS_H_

// Which of the engine's own CPU loops run: the AVX-512 ones, the AVX2 + FMA
// ones, or the portable C++ ones; or AMX, which is AVX-512 with the packed
// bfloat16 product on the tile unit (engine/cpu/amx_kernel.h) and every
// other loop the AVX-512 one. Each product the batch-invariance contract
// covers (docs/DESIGN.md, "What is bit-identical") has all three, and within
// one family each output is summed in one fixed order whatever the rows, the
// threads or the BLAS, so the bits hold on any CPU.
//
// The family is the best the CPU has short of AMX, which is taken only when
// named, or the one named by the environment variable LINSERVE_CPU_KERNELS
// (amx, avx512, avx2, portable, auto), read once at the first call: CI
// forces each family on one machine that way, and a user can rule out a
// path. A higher family than the CPU has is not taken. No LibTorch here: the kernels' own files include this header.

namespace linserve {

enum class CpuKernels { kPortable = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

// The family in force for this process. Thread-safe.
CpuKernels ActiveCpuKernels();

// True when the family in force is AVX-512 or AMX: its vector loops are the
// AVX-512 ones. Thread-safe.
bool ActiveCpuHasAvx512();

// True when the family in force is AMX: the CPU has amx_tile, amx_bf16 and
// amx_int8 and Linux granted this process the tile data. Thread-safe.
bool ActiveCpuHasAmx();

// True when the family in force is AVX-512 or AMX and the CPU has the
// AVX-512 BF16 dot product (vdpbf16ps). Thread-safe.
bool ActiveCpuHasAvx512Bf16();

// True when the family in force is AVX-512 or AMX and the CPU has the
// AVX-512 VNNI byte dot product (vpdpbusd) with AVX-512BW beside it: the 8-
// and 4-bit weight products (engine/cpu/quantized_kernel.h). Thread-safe.
bool ActiveCpuHasAvx512Vnni();

// "amx", "avx512", "avx2" or "portable".
const char* CpuKernelsName(CpuKernels kernels);

// The family `requested` ("amx", "avx512", "avx2", "portable", "auto" or
// empty), capped at what `supported` is; an unknown name counts as "auto".
// Pure, for tests.
CpuKernels ChooseCpuKernels(const char* requested, CpuKernels supported);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_KERNELS_H_
