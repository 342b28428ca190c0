# pcdino_target_warnings(<target>): the warning set every pcdino target compiles with.
function(pcdino_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wnon-virtual-dtor
                                           $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>)
endfunction()
