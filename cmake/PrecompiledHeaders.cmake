# Precompiled headers for the libraries whose headers cost the most.
#
# Parsing LibTorch's headers takes several seconds of every translation unit
# that includes them (<torch/torch.h> ~20 s here, <torch/types.h> ~8 s); a
# precompiled <torch/types.h> loads in ~3 s. One target builds each header
# once and every target that includes LibTorch reuses it (REUSE_FROM), so the
# tree precompiles it once, not once per test binary. gRPC and protobuf get
# the same for the targets that include them.
#
# Each also holds the other headers that its units parse most (clang's
# -ftime-trace over a sample of units): LibTorch's nn modules, abseil's
# status, nlohmann::json; the test holders add GoogleTest. With them a
# LibTorch unit compiled in 0.70-0.74 of its time (14 engine units, clang,
# the normal and the TSan build), an engine test unit in about 0.6 and
# eight gRPC units in 0.91.
#
#   linserve_precompile(<target> torch|grpc [UNOPTIMIZED])
#
# UNOPTIMIZED compiles <target> at -O0 (after every other -O, so also in the
# sanitizer builds) with a header precompiled at -O0: clang refuses a header
# built at another level. For the test programs that drive real servers and
# clients: their own code waits on processes and sockets, and the optimizer
# and code generation took two thirds of such a unit's time under ASan
# (clang's -ftime-trace); one e2e test unit compiled in 16.6 s at -O3 and in
# 10.6 s at -O0. What they test (the libraries and the programs they start)
# stays optimized.
#
# A target's files that must not or need not load it set
# SKIP_PRECOMPILE_HEADERS: the fixed-order kernels (built for other
# instruction sets), the zip and pickle readers (no LibTorch). Off with
# -DLINSERVE_PRECOMPILE_HEADERS=OFF (a compiler or cache that cannot use them).
option(LINSERVE_PRECOMPILE_HEADERS "Precompile LibTorch's, gRPC's and protobuf's headers" ON)

if(LINSERVE_PRECOMPILE_HEADERS)
  set(_holder_source ${CMAKE_BINARY_DIR}/precompiled_headers_holder.cc)
  file(WRITE ${_holder_source} "// Holds the precompiled headers other targets reuse.\n")

  add_library(linserve_precompiled_torch OBJECT ${_holder_source})
  target_link_libraries(linserve_precompiled_torch PRIVATE ${TORCH_LIBRARIES} absl::status
    nlohmann_json::nlohmann_json)
  target_precompile_headers(linserve_precompiled_torch PRIVATE <torch/types.h> <torch/utils.h>
    <torch/nn/module.h> <torch/nn/functional.h> <torch/nn/modules/container/modulelist.h>
    <torch/nn/modules/embedding.h> <torch/nn/modules/linear.h> <torch/nn/modules/normalization.h>
    <absl/status/statusor.h> <nlohmann/json.hpp>)

  add_library(linserve_precompiled_grpc OBJECT ${_holder_source})
  target_link_libraries(linserve_precompiled_grpc PRIVATE gRPC::grpc++ protobuf::libprotobuf
    nlohmann_json::nlohmann_json absl::status absl::flat_hash_map absl::strings)
  target_precompile_headers(linserve_precompiled_grpc PRIVATE <grpcpp/grpcpp.h>
    <grpcpp/impl/codegen/proto_utils.h> <google/protobuf/message.h>
    <google/protobuf/descriptor.pb.h> <nlohmann/json.hpp> <absl/status/statusor.h>
    <absl/container/flat_hash_map.h> <absl/strings/str_cat.h>)

  # The same two at -O0, for UNOPTIMIZED targets.
  foreach(kind torch grpc)
    add_library(linserve_precompiled_${kind}_unoptimized OBJECT ${_holder_source})
    get_target_property(_libraries linserve_precompiled_${kind} LINK_LIBRARIES)
    get_target_property(_headers linserve_precompiled_${kind} PRECOMPILE_HEADERS)
    target_link_libraries(linserve_precompiled_${kind}_unoptimized PRIVATE ${_libraries})
    target_precompile_headers(linserve_precompiled_${kind}_unoptimized PRIVATE ${_headers})
    # Only test programs are UNOPTIMIZED, and every one includes GoogleTest;
    # linked, so that the header is made with the definitions the units get
    # (GTEST_HAS_PTHREAD).
    if(LINSERVE_BUILD_TESTS)
      find_package(GTest REQUIRED)
      target_link_libraries(linserve_precompiled_${kind}_unoptimized PRIVATE GTest::gtest)
      target_precompile_headers(linserve_precompiled_${kind}_unoptimized PRIVATE <gtest/gtest.h>)
    endif()
    target_compile_options(linserve_precompiled_${kind}_unoptimized PRIVATE -O0)
  endforeach()
  # clang records the modification time of each header in a .pch and
  # refuses the .pch when a header's time differs: a fresh checkout writes
  # cmake_pch.hxx anew, so a .pch served by the compiler cache would be
  # refused, and one made anew would differ from the cached one in its bytes,
  # making every unit that loads it a cache miss. Without the time, both are
  # the same in every build of the same tree at the same path.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    foreach(holder linserve_precompiled_torch linserve_precompiled_grpc
        linserve_precompiled_torch_unoptimized linserve_precompiled_grpc_unoptimized)
      target_compile_options(${holder} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
    endforeach()
  endif()
endif()

# A precompiled header loads only into units with the same macros as it was
# built with. LibTorch defines _GLIBCXX_USE_CXX11_ABI=1 (the compiler's
# default); the gRPC header and its users define it too, so that a test
# linking both can use it.
set(_grpc_definitions _GLIBCXX_USE_CXX11_ABI=1)
if(LINSERVE_PRECOMPILE_HEADERS)
  target_compile_definitions(linserve_precompiled_grpc PRIVATE ${_grpc_definitions})
  target_compile_definitions(linserve_precompiled_grpc_unoptimized PRIVATE ${_grpc_definitions})
endif()

function(linserve_precompile target kind)
  cmake_parse_arguments(arg "UNOPTIMIZED" "" "" ${ARGN})
  set(holder linserve_precompiled_${kind})
  if(arg_UNOPTIMIZED)
    target_compile_options(${target} PRIVATE -O0)
    set(holder ${holder}_unoptimized)
  endif()
  if(LINSERVE_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} REUSE_FROM ${holder})
  endif()
  if(kind STREQUAL "grpc")
    target_compile_definitions(${target} PRIVATE ${_grpc_definitions})
  endif()
endfunction()
