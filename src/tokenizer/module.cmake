# Included from reprise_module(tokenizer) in src/CMakeLists.txt.
# ICU (Debian: libicu-dev) gives the Unicode general categories and White_Space property that
# the pre-tokenizers split on.
find_package(ICU REQUIRED COMPONENTS uc)
target_link_libraries(reprise_tokenizer PRIVATE ICU::uc)
