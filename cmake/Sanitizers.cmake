# tessera_add_sanitized_copy(<name> <sources...>): helper flags for ASan+UBSan targets.
set(TESSERA_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
function(tessera_sanitize target)
  target_compile_options(${target} PRIVATE ${TESSERA_SANITIZE_FLAGS})
  target_link_options(${target} PRIVATE -fsanitize=address,undefined)
endfunction()
