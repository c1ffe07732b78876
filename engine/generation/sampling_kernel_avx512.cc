// engine/generation/sampling_kernel.h's loops for the avx512 kernel family
// (engine/generation/CMakeLists.txt names the instruction set).

#include <cstdint>

#include "engine/generation/sampling_kernel.h"

#define LINSERVE_SAMPLING_KERNEL(name) name##Avx512
#include "engine/generation/sampling_kernel.inc"
#undef LINSERVE_SAMPLING_KERNEL
