# The installed package, used as a program outside the tree would use it: installs the build into
# a fresh prefix, then builds examples/long_table.cpp against it twice, through find_package(Reprise)
# and through pkg-config, and runs both on a model the installed `reprise make-model` writes (with
# its built-in vocabulary): each must answer both questions, the second from cached tokens.
# Run by ctest (tests/CMakeLists.txt) as
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P install_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake needs -D${var}=...")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${code}): ${command}\n${out}\n${err}")
  endif()
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# Only the public headers are installed: no src/ folder, no internal header.
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/*)
if(NOT headers STREQUAL "reprise/engine.h")
  message(FATAL_ERROR "installed headers should be reprise/engine.h only, are: ${headers}")
endif()
foreach(file bin/reprise)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "not installed: ${file}")
  endif()
endforeach()
file(GLOB_RECURSE archives ${prefix}/*/libreprise.a)
file(GLOB_RECURSE pc_files ${prefix}/*/reprise.pc)
file(GLOB_RECURSE configs ${prefix}/*/RepriseConfig.cmake)
if(NOT archives OR NOT pc_files OR NOT configs)
  message(FATAL_ERROR "missing libreprise.a, reprise.pc or RepriseConfig.cmake under ${prefix}")
endif()

set(example ${SOURCE_DIR}/examples/long_table.cpp)

# 1. find_package(Reprise), with nothing but the prefix to go on.
set(cmake_build ${WORK_DIR}/cmake-build)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${cmake_build} -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DEXAMPLE_SOURCE=${example})
run(${CMAKE_COMMAND} --build ${cmake_build})

# 2. pkg-config (libreprise is static: --static lists what its objects call).
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(pkg-config --static --cflags --libs reprise)
string(STRIP "${run_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
set(pc_program ${WORK_DIR}/long_table_pc)
run(c++ -std=c++20 -O1 ${example} -o ${pc_program} ${flags})

set(model ${WORK_DIR}/tiny.gguf)
run(${prefix}/bin/reprise make-model --shape tiny -o ${model})
foreach(program ${cmake_build}/long_table ${pc_program})
  run(${program} ${model})
  string(REGEX MATCHALL "cached [0-9]+" cached "${run_output}")
  list(LENGTH cached answers)
  if(NOT answers EQUAL 2)
    message(FATAL_ERROR "${program}: expected two answers:\n${run_output}")
  endif()
  list(GET cached 1 second)
  if(second STREQUAL "cached 0")
    message(FATAL_ERROR "${program}: the second answer reused nothing:\n${run_output}")
  endif()
  message(STATUS "ok: ${program}: ${cached}")
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
