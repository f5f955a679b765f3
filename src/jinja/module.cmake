# Included from reprise_module(jinja) in src/CMakeLists.txt.
# ICU (Debian: libicu-dev) gives the full Unicode case mappings of Python's str.upper(), lower(),
# title() and capitalize(), which the case filters and methods follow.
find_package(ICU REQUIRED COMPONENTS uc)
target_link_libraries(reprise_jinja PRIVATE ICU::uc)
