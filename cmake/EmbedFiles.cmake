# tessera_embed_files(OUTPUT <generated.cc> HEADER <include path> NAMESPACE <ns> ARRAY <name>
#                     FILES <file>...)
# Generates <generated.cc>, which includes HEADER and defines, in namespace NAMESPACE,
#   extern const EmbeddedFile <ARRAY>[];  extern const size_t <ARRAY>Count;
# one entry per file: {base name, bytes}. HEADER declares both and `struct EmbeddedFile
# { std::string_view name; std::string_view bytes; }`. The file is regenerated when any input
# changes, so the binary always serves what the tree holds (cmake/embed_files_script.cmake).
function(tessera_embed_files)
  cmake_parse_arguments(EMBED "" "OUTPUT;HEADER;NAMESPACE;ARRAY" "FILES" ${ARGN})
  string(JOIN "|" files ${EMBED_FILES})
  add_custom_command(
    OUTPUT ${EMBED_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${EMBED_OUTPUT} -DHEADER=${EMBED_HEADER}
            -DNAMESPACE=${EMBED_NAMESPACE} -DARRAY=${EMBED_ARRAY} -DFILES=${files}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_files_script.cmake
    DEPENDS ${EMBED_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed_files_script.cmake
    COMMENT "Embedding ${EMBED_ARRAY}"
    VERBATIM)
endfunction()
