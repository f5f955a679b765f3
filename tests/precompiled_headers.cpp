// The donor of the test binaries' shared precompiled header (tests/CMakeLists.txt): CMake
// compiles the header beside this file; the file itself adds nothing.
