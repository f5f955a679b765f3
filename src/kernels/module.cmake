# Included from reprise_module(kernels): per-file flags for the SIMD targets.
# Only the files of one target get that target's instructions; dispatch picks a target at run
# time (cpu_target.cpp), so the library never needs -march=native.
#
# No contraction of a * b + c into FMA behind our back: where a kernel fuses, it says so with an
# intrinsic, so an output's rounding is the same wherever the code is inlined.
target_compile_options(reprise_kernels PRIVATE -ffp-contract=off)

# Without them (REPRISE_SIMD_KERNELS=OFF, or not x86-64) the files of the SIMD targets are left out
# and dispatch knows only the scalar target. The fuzz build does this: its targets parse and check
# files and never run a product, and the sanitized SIMD files were half its compile time.
if(NOT REPRISE_SIMD_KERNELS OR NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  get_target_property(kernel_sources reprise_kernels SOURCES)
  list(FILTER kernel_sources EXCLUDE REGEX "_avx(2|512)[a-z_]*\\.cpp$")
  set_property(TARGET reprise_kernels PROPERTY SOURCES ${kernel_sources})
else()
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels/matmul_avx512.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/decode_avx512.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/ops_avx512.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/interleaved_avx512.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/row_groups_avx512.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/paged_attention_avx512.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/paged_attention_q8_avx512.cpp PROPERTIES
      COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mfma;-mf16c")
  # The same instruction set plus GFNI, for the one-token tiles that split nibbles with it (taken
  # only where the CPU has GFNI; see BestNibbleSplit).
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels/decode_avx512_gfni.cpp PROPERTIES
      COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mgfni;-mfma;-mf16c")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels/matmul_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/decode_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/k_quant_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/k_quant_streams_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/ops_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/paged_attention_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/paged_attention_q8_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/row_groups_avx2.cpp
                              ${CMAKE_CURRENT_SOURCE_DIR}/kernels/unpack_avx2.cpp PROPERTIES
      COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  target_compile_definitions(reprise_kernels PRIVATE REPRISE_KERNELS_AVX512 REPRISE_KERNELS_AVX2)
endif()
