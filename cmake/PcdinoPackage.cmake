# The binary package a pcdino image installs (issue #20): `cpack` in the build folder (scripts/package)
# makes pcdino-<version>-<os>-x86_64.tar.gz, named for the OS it was built on, holding
#   bin/pcdino [bin/pcdino-train bin/pcdino-extract]   the programs (LibTorch ones when built with it)
#   lib/slurm/spank_pcdino.so                          the SPANK plugin (when built with Slurm's headers)
#   share/pcdino/spank/accel-profiles.yaml             the accelerator profiles the plugin reads
#   share/pcdino/package.txt                           name, version, os, arch, torch, slurm (the Slurm
#                                                      the plugin is built for), cuda, then needs=<soname>
#                                                      per shared library the programs and plugin load
#                                                      from the system (verify.sh and 00-base.sh read it)
# Nothing from the system is bundled: the image provides the runtime libraries; package.txt says which.

# OS names as ParallelCluster spells them (Image.Os), from /etc/os-release's ID and VERSION_ID.
set(_pcdino_os_table "amzn:2023=alinux2023" "amzn:2=alinux2" "ubuntu:22.04=ubuntu2204" "ubuntu:24.04=ubuntu2404"
                     "rhel:8=rhel8" "rhel:9=rhel9" "rocky:8=rocky8" "rocky:9=rocky9" "debian:12=debian12")
set(_pcdino_os_id "unknown")
if(EXISTS /etc/os-release)
  file(STRINGS /etc/os-release _id REGEX "^ID=")
  file(STRINGS /etc/os-release _version REGEX "^VERSION_ID=")
  string(REGEX REPLACE "^ID=\"?([^\"]*)\"?$" "\\1" _id "${_id}")
  string(REGEX REPLACE "^VERSION_ID=\"?([^\"]*)\"?$" "\\1" _version "${_version}")
  string(REGEX REPLACE "\\..*$" "" _major "${_version}")  # rhel 9.4 -> 9: packages are built per major
  foreach(_row IN LISTS _pcdino_os_table)
    if(_row MATCHES "^${_id}:(${_version}|${_major})=(.*)$")
      set(_pcdino_os_id "${CMAKE_MATCH_2}")
    endif()
  endforeach()
endif()
set(PCDINO_PACKAGE_OS "${_pcdino_os_id}" CACHE STRING "OS the package is built for, as ParallelCluster's Image.Os names it")

set(PCDINO_PACKAGE_TORCH "none")
if(PCDINO_HAVE_TORCH)
  set(PCDINO_PACKAGE_TORCH "${Torch_VERSION}")
  if(NOT PCDINO_PACKAGE_TORCH)
    set(PCDINO_PACKAGE_TORCH "found")
  endif()
endif()

# package.txt is written at install time, when the installed files exist: the sonames they need from the
# system come from the files themselves (file(GET_RUNTIME_DEPENDENCIES), CMake's ldd).
install(CODE "
  set(_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(DEFINED ENV{DESTDIR})
    set(_prefix \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
  endif()
  file(GLOB _programs \"\${_prefix}/bin/pcdino*\")
  file(GLOB _modules \"\${_prefix}/lib/slurm/*.so\")
  file(GET_RUNTIME_DEPENDENCIES EXECUTABLES \${_programs} MODULES \${_modules}
       RESOLVED_DEPENDENCIES_VAR _resolved UNRESOLVED_DEPENDENCIES_VAR _unresolved
       PRE_EXCLUDE_REGEXES \"^ld-linux\" \"^linux-vdso\")
  if(_unresolved)
    message(FATAL_ERROR \"pcdino package: unresolved libraries: \${_unresolved}\")
  endif()
  set(_text \"name=pcdino\\nversion=${PROJECT_VERSION}\\nos=${PCDINO_PACKAGE_OS}\\narch=x86_64\\ntorch=${PCDINO_PACKAGE_TORCH}\\nslurm=${PCDINO_SLURM_VERSION}\\ncuda=${PCDINO_CUDA_VERSION}\\n\")
  set(_names)
  foreach(_lib IN LISTS _resolved)
    get_filename_component(_name \"\${_lib}\" NAME)
    list(APPEND _names \"\${_name}\")
  endforeach()
  list(SORT _names)
  list(REMOVE_DUPLICATES _names)
  foreach(_name IN LISTS _names)
    string(APPEND _text \"needs=\${_name}\\n\")
  endforeach()
  file(WRITE \"\${_prefix}/share/pcdino/package.txt\" \"\${_text}\")
  message(STATUS \"pcdino package: os=${PCDINO_PACKAGE_OS}, \${CMAKE_INSTALL_PREFIX}/share/pcdino/package.txt lists the system libraries it needs\")
")

set(CPACK_GENERATOR TGZ)
set(CPACK_PACKAGE_NAME pcdino)
set(CPACK_PACKAGE_FILE_NAME "pcdino-${PROJECT_VERSION}-${PCDINO_PACKAGE_OS}-x86_64")
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)
set(CPACK_STRIP_FILES ON)  # the build keeps its debug info; nodes need none
set(CPACK_SOURCE_IGNORE_FILES "/build/;/\\\\.git/")
include(CPack)
