# Included from reprise_module(bench): the peak probes of `reprise bench kernels` are compiled once
# per instruction set; peak.cpp picks one at run time with the kernels' CPU target.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/bench/peak_avx512.cpp PROPERTIES
      COMPILE_OPTIONS "-mavx512f;-mfma")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/bench/peak_avx2.cpp PROPERTIES
      COMPILE_OPTIONS "-mavx2;-mfma")
  target_compile_definitions(reprise_bench PRIVATE REPRISE_BENCH_AVX512 REPRISE_BENCH_AVX2)
endif()
