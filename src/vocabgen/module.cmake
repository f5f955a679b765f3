# Included from reprise_module(vocabgen): the training text of the built-in vocabulary is compiled
# into the binary (corpus.txt as a raw string literal), so the vocabulary needs no file at run time.
set(vocabgen_corpus ${CMAKE_CURRENT_SOURCE_DIR}/vocabgen/corpus.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${vocabgen_corpus})
file(READ ${vocabgen_corpus} REPRISE_CORPUS_TEXT)
string(FIND "${REPRISE_CORPUS_TEXT}" ")corpus\"" vocabgen_delimiter)
if(NOT vocabgen_delimiter EQUAL -1)
  message(FATAL_ERROR "${vocabgen_corpus} must not contain the raw-string delimiter )corpus\"")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/vocabgen/corpus.cpp.in
               ${CMAKE_CURRENT_BINARY_DIR}/vocabgen/corpus.cpp @ONLY)
target_sources(reprise_vocabgen PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/vocabgen/corpus.cpp)
