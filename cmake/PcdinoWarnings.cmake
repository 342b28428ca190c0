# pcdino_target_warnings(<target>): the warning set every pcdino target compiles with.
function(pcdino_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor)
endfunction()
