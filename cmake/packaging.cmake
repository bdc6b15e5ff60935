# Packages of the C library (included from the top-level CMakeLists.txt): `cpack` in a build tree
# writes
#   libattn<SOVERSION>_<version>_<arch>.deb   component runtime: libattn.so.<version>, its SONAME
#                                             link, LICENSE; shlibs + ldconfig trigger
#   libattn-dev_<version>_<arch>.deb          component dev: libattn.so link, attn.h, attn.pc,
#                                             CMake package, HTML reference, attn(3), CHANGELOG;
#                                             Depends: libattn<SOVERSION> (= <version>)
#   libattn-<version>-Linux-<cpu>.tar.gz      both components in one relocatable tree: extract it
#                                             anywhere, its attn.pc follows it (${pcfiledir}) and
#                                             adds an rpath, so programs run with no LD_LIBRARY_PATH
# The .deb files install under /usr (libdir lib/<triplet>, see the install section of the
# top-level CMakeLists.txt); their attn.pc is the plain `prefix=/usr`, `-lattn` one.
# Only the components `runtime` and `dev` are packed: install rules of other components (language
# bindings) or without a component never reach these packages.
#
#   cmake -S . -B build -G Ninja && cmake --build build && cpack --config build/CPackConfig.cmake -B out
#   sudo apt install ./out/libattn0_*.deb ./out/libattn-dev_*.deb
#
# Cache variables: ATTN_PACKAGE_MAINTAINER, ATTN_PACKAGE_HOMEPAGE (empty = no Homepage field).

set(ATTN_PACKAGE_MAINTAINER "libattn maintainers <maintainers@users.noreply.a-seed-737d513a.example>"
    CACHE STRING "Maintainer field of the .deb packages: Name <email>")
set(ATTN_PACKAGE_HOMEPAGE "" CACHE STRING "Homepage field of the .deb packages (empty: none)")

# Licence and changelog, in the packages and in every `cmake --install`.
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DOCDIR}"
        COMPONENT runtime)
install(FILES "${PROJECT_SOURCE_DIR}/CHANGELOG.md" DESTINATION "${CMAKE_INSTALL_DOCDIR}"
        COMPONENT dev)

# --- Common ----------------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME "libattn")
set(CPACK_PACKAGE_VENDOR "libattn")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${ATTN_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "exact masked scaled dot-product attention on the CPU (C API)")
set(CPACK_PACKAGE_HOMEPAGE_URL "${ATTN_PACKAGE_HOMEPAGE}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_FILE_NAME "libattn-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_GENERATOR "TGZ;DEB")
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_COMPONENT_RUNTIME_DISPLAY_NAME "libattn shared library")
set(CPACK_COMPONENT_DEV_DISPLAY_NAME "libattn development files")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_ARCHIVE_COMPONENT_INSTALL ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Per generator (cpack includes this file once per generator, CPACK_GENERATOR = that one):
#  DEB: prefix /usr, installed through DESTDIR so the install step sees CMAKE_INSTALL_PREFIX=/usr
#       (that is what selects the /usr flavour of attn.pc); one package per component;
#  archives: no prefix (a relocatable tree), both components in one archive.
set(CPACK_PROJECT_CONFIG_FILE "${CMAKE_BINARY_DIR}/CPackProjectConfig.cmake")
file(WRITE "${CPACK_PROJECT_CONFIG_FILE}" [=[
# Written by cmake/packaging.cmake: per-generator CPack settings.
if(CPACK_GENERATOR STREQUAL "DEB")
  set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
  set(CPACK_INSTALL_PREFIX "/usr")
  set(CPACK_SET_DESTDIR ON)
  set(CPACK_COMPONENTS_GROUPING IGNORE)
  # Each component's description (CPACK_DEBIAN_<COMPONENT>_DESCRIPTION in CPackConfig.cmake) starts
  # with its own synopsis line: keep CPackDeb from
  # putting the common summary in front of it (it does so unless the summary is the default).
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CPACK_DEFAULT_PACKAGE_DESCRIPTION_SUMMARY}")
else()
  set(CPACK_PACKAGING_INSTALL_PREFIX "")
  set(CPACK_SET_DESTDIR OFF)
  set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
  set(CPACK_COMPONENT_INCLUDE_TOPLEVEL_DIRECTORY ON)   # libattn-<version>-Linux-<cpu>/...
endif()
]=])

# --- Debian ----------------------------------------------------------------------------------
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${ATTN_PACKAGE_MAINTAINER}")
if(ATTN_PACKAGE_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${ATTN_PACKAGE_HOMEPAGE}")
endif()
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)   # dev -> Depends: runtime (= version)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)          # Depends from dpkg-shlibdeps (libc6, libstdc++6, ...)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)    # DEBIAN/shlibs: libattn 0 libattn0 (>= version)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(_attn_deb_long
  "libattn computes exact scaled dot-product attention in fp32 with causal, padding and\n"
  "caller masks, sliding windows, softcap, ALiBi, bias and attention sinks, using xsimd\n"
  "kernels (scalar, SSE2, AVX2, AVX-512) picked at run time and its own thread pool.\n"
  "Its stable C API is also used by the Java, C#, Go and Python bindings.")
string(JOIN "" _attn_deb_long ${_attn_deb_long})

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "libattn${ATTN_SOVERSION}")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}\n${_attn_deb_long}\n.\nThis package contains the shared library.")
# dpkg runs ldconfig once at the end of `dpkg -i` / `dpkg -r` (libc-bin's ldconfig trigger), so a
# program linked with -lattn runs right away. (CPack 3.25 also writes postinst/postrm scripts that
# call ldconfig for libraries under /usr/lib; the trigger is the Debian way and costs nothing.)
file(WRITE "${CMAKE_BINARY_DIR}/debian/runtime/triggers" "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA "${CMAKE_BINARY_DIR}/debian/runtime/triggers")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME "libattn-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
  "exact masked attention on the CPU (C API) - development files\n${_attn_deb_long}\n.\n"
  "This package contains the header attn.h, the pkg-config file attn.pc, the CMake\n"
  "package (find_package(attn), target attn::attn), the HTML reference and the man\n"
  "page attn(3).")
string(JOIN "" CPACK_DEBIAN_DEV_DESCRIPTION ${CPACK_DEBIAN_DEV_DESCRIPTION})

# Source package (`cpack --config CPackSourceConfig.cmake`): the tree without builds and VCS data.
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_PACKAGE_FILE_NAME "libattn-${PROJECT_VERSION}")
# (Regular expressions; CPackSourceConfig.cmake parses them once more, hence the \\\\.)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/crash-[^/]*$" "/__pycache__/"
    "\\\\.swp$" "~$")

include(CPack)
