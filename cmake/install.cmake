# `cmake --install build --prefix P`: the `reprise` binary, libreprise, the public headers, a CMake
# package (find_package(Reprise) gives Reprise::reprise) and a pkg-config file (reprise.pc).
include(CMakePackageConfigHelpers)

set(REPRISE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Reprise)

install(TARGETS reprise RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS reprise_lib EXPORT RepriseTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/reprise DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT RepriseTargets NAMESPACE Reprise:: DESTINATION ${REPRISE_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/RepriseConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/RepriseConfig.cmake
                              INSTALL_DESTINATION ${REPRISE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/RepriseConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/RepriseConfig.cmake ${PROJECT_BINARY_DIR}/RepriseConfigVersion.cmake
        DESTINATION ${REPRISE_CMAKE_DIR})

# reprise.pc finds its prefix from its own folder, so the file is right under any --prefix.
file(RELATIVE_PATH REPRISE_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
# A sanitized build's archive needs its sanitizer's runtime wherever it is linked.
set(REPRISE_PC_SANITIZER_FLAGS "")
foreach(flag ${REPRISE_SANITIZER_FLAGS})
  string(APPEND REPRISE_PC_SANITIZER_FLAGS " ${flag}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/reprise.pc.in ${PROJECT_BINARY_DIR}/reprise.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/reprise.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
