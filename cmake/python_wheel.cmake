# The Python wheel (pyproject.toml, scikit-build-core): put libattn into the wheel's package
# folder, attn/, where bindings/python/attn/_lib.py looks right after $ATTN_LIBRARY.
#
# pyproject.toml has CMake include this file at the end of project(attn) (the cache variable
# CMAKE_PROJECT_attn_INCLUDE), so the top-level CMakeLists.txt needs no line for it. Including it
# from there instead (`if(SKBUILD) include(python_wheel) endif()`) works too; the guard below
# makes a second include harmless.
#
# Only the wheel's own install component: pyproject.toml installs just `python_wheel`, so the
# library's regular install rules (lib/, the header, the CMake package, attn.pc) stay out of the
# wheel. The target `attn` does not exist yet when this file is read (it is included right after
# project()): $<TARGET_FILE:attn> is resolved when the build system is generated.
include_guard(GLOBAL)
if(NOT SKBUILD)
  return()
endif()

# The real file (libattn.so.<version>, SONAME libattn.so.0), not the symlinks (a wheel cannot
# hold symlinks: each would become a second copy), under the name attn/libattn.so.
install(FILES "$<TARGET_FILE:attn>"
  DESTINATION attn
  RENAME libattn${CMAKE_SHARED_LIBRARY_SUFFIX}
  PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
              WORLD_READ WORLD_EXECUTE
  COMPONENT python_wheel)

# scikit-build-core installs with --strip (install.strip), which strips only install(TARGETS)
# files: strip this copy the same way.
if(CMAKE_STRIP)
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-unneeded
        \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/attn/libattn${CMAKE_SHARED_LIBRARY_SUFFIX}\"
        COMMAND_ERROR_IS_FATAL ANY)
    endif()"
    COMPONENT python_wheel)
endif()
