# Included from reprise_module(kernels): per-file flags for the SIMD targets.
# Only the files of one target get that target's instructions; dispatch picks a target at run
# time (cpu_target.cpp), so the library never needs -march=native.
#
# No contraction of a * b + c into FMA behind our back: where a kernel fuses, it says so with an
# intrinsic, so an output's rounding is the same wherever the code is inlined.
target_compile_options(reprise_kernels PRIVATE -ffp-contract=off)
