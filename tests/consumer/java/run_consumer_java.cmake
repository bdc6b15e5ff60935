# consumer_java (cmake -P): does org.libattn:attn work for an outside Maven project, with no
# java.library.path and no LD_LIBRARY_PATH?
#   1. a fresh folder <tmp> outside the source and build trees, and in it a local Maven repository
#      <tmp>/m2 that holds nothing of libattn: every other group of the user's ~/.m2/repository
#      is symlinked into it (plugins resolve from there, offline once they are cached; what is
#      missing is downloaded once, into ~/.m2 through the links), org/libattn never is;
#   2. `mvn install` of bindings/java/pom.xml (the binding's own build, output in <tmp>) into
#      <tmp>/m2, and checks of what it installed: jar (natives, manifest), -sources, -javadoc, pom;
#   3. a copy of project/ built with `mvn package` against org.libattn:attn:VERSION from <tmp>/m2;
#   4. `java -cp <installed jar>:<app jar> example.App`: the seed example's out[1][0] must be
#      exactly 15 and both native libraries must be mapped from a libattn-* directory the loader
#      extracted under java.io.tmpdir (deleted again once they are loaded);
#   5. two such JVMs at once, released together by a barrier: two different directories, both OK.
# Inputs (-D): SOURCE_DIR POM VERSION BUILD_DIR NATIVE_PLATFORM_DIR GEN_PACKAGE_DIR MVN JAVA
# Set ATTN_KEEP_CONSUMER_TMP=1 in the environment to keep <tmp> for inspection.
cmake_minimum_required(VERSION 3.25)

foreach(_v SOURCE_DIR POM VERSION BUILD_DIR NATIVE_PLATFORM_DIR GEN_PACKAGE_DIR MVN JAVA)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_java.cmake: -D${_v}=... is required")
  endif()
endforeach()
string(TIMESTAMP _t0 "%s")

cmake_path(GET NATIVE_PLATFORM_DIR PARENT_PATH NATIVE_DIR)             # java/native
cmake_path(GET NATIVE_PLATFORM_DIR FILENAME PLATFORM)                  # linux-x86_64
cmake_path(GET GEN_PACKAGE_DIR PARENT_PATH _gen_org)
cmake_path(GET _gen_org PARENT_PATH GEN_DIR)                           # java/gen
foreach(_f "${NATIVE_PLATFORM_DIR}/libattn.so.0" "${NATIVE_PLATFORM_DIR}/libattn_java.so"
           "${GEN_PACKAGE_DIR}/AttnNative.java")
  if(NOT EXISTS "${_f}")
    message(FATAL_ERROR "consumer_java: ${_f} is missing: build the project first")
  endif()
endforeach()

# ------------------------------------------------------------------------------------------------
# 1. Temporary folder and local repository.
if(DEFINED ENV{TMPDIR} AND IS_DIRECTORY "$ENV{TMPDIR}")
  set(_tmp_root "$ENV{TMPDIR}")
else()
  set(_tmp_root "/tmp")
endif()
string(RANDOM LENGTH 10 _rand)
set(TMP "${_tmp_root}/attn-consumer-java-${_rand}")
file(REMOVE_RECURSE "${TMP}")
file(MAKE_DIRECTORY "${TMP}")
message(STATUS "temporary folder: ${TMP}")

function(cleanup)
  if("$ENV{ATTN_KEEP_CONSUMER_TMP}" STREQUAL "")
    file(REMOVE_RECURSE "${TMP}")
  else()
    message(STATUS "kept ${TMP}")
  endif()
endfunction()

function(fail)
  cleanup()
  string(JOIN "" _msg ${ARGN})
  message(FATAL_ERROR "consumer_java: ${_msg}")
endfunction()

foreach(_tree "${BUILD_DIR}" "${SOURCE_DIR}")
  cmake_path(IS_PREFIX _tree "${TMP}" NORMALIZE _inside)
  if(_inside)
    fail("the temporary folder ${TMP} lies inside ${_tree}: set TMPDIR elsewhere")
  endif()
endforeach()

# The user's repository: $ATTN_M2_REPOSITORY, else ~/.m2/repository. Its usual groups are
# created (empty) if missing, so that what a cold machine downloads lands there, once.
if(NOT "$ENV{ATTN_M2_REPOSITORY}" STREQUAL "")
  set(USER_REPO "$ENV{ATTN_M2_REPOSITORY}")
else()
  set(USER_REPO "$ENV{HOME}/.m2/repository")
endif()
foreach(_g com commons-codec commons-io io javax org/apache org/codehaus org/eclipse org/iq80
           org/ow2 org/slf4j org/sonatype org/tukaani)
  file(MAKE_DIRECTORY "${USER_REPO}/${_g}")
endforeach()
set(REPO "${TMP}/m2")
file(MAKE_DIRECTORY "${REPO}/org")
file(GLOB _top RELATIVE "${USER_REPO}" "${USER_REPO}/*")
foreach(_e IN LISTS _top)
  if(NOT _e STREQUAL "org")
    file(CREATE_LINK "${USER_REPO}/${_e}" "${REPO}/${_e}" SYMBOLIC)
  endif()
endforeach()
file(GLOB _org RELATIVE "${USER_REPO}/org" "${USER_REPO}/org/*")
foreach(_e IN LISTS _org)
  if(NOT _e STREQUAL "libattn")
    file(CREATE_LINK "${USER_REPO}/org/${_e}" "${REPO}/org/${_e}" SYMBOLIC)
  endif()
endforeach()

# Runs a command without LD_LIBRARY_PATH (ARGN may start with NAME=VALUE settings for its
# environment); fails the test with its output unless it exits 0.
function(run OUT_VAR WHAT)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH ${ARGN}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    fail("${WHAT} failed (${_rc}):\n  ${_cmd}\n--- stdout\n${_out}\n--- stderr\n${_err}")
  endif()
  set(${OUT_VAR} "${_out}" PARENT_SCOPE)
endfunction()

function(elapsed WHAT)
  string(TIMESTAMP _now "%s")
  math(EXPR _s "${_now} - ${_t0}")
  message(STATUS "[${_s} s] ${WHAT}")
endfunction()

# Maven's JVM: C1 only and the serial collector start short builds faster on 2 shared cores.
set(_mvn "MAVEN_OPTS=$ENV{MAVEN_OPTS} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
  "${MVN}" -B -ntp -q "-Dmaven.repo.local=${REPO}")

# ------------------------------------------------------------------------------------------------
# 2. The binding, installed into the temporary repository.
run(_ "mvn install of the binding" ${_mvn} -f "${POM}" install
  "-Drevision=${VERSION}"
  "-Dattn.cmake.build.dir=${BUILD_DIR}"
  "-Dattn.generated.dir=${GEN_DIR}"
  "-Dattn.native.dir=${NATIVE_DIR}"
  "-Dattn.build.dir=${TMP}/binding-build")
elapsed("mvn install of org.libattn:attn:${VERSION} into ${REPO}")

set(_art "${REPO}/org/libattn/attn/${VERSION}")
set(JAR "${_art}/attn-${VERSION}.jar")
foreach(_f "${JAR}" "${_art}/attn-${VERSION}-sources.jar" "${_art}/attn-${VERSION}-javadoc.jar"
           "${_art}/attn-${VERSION}.pom")
  if(NOT EXISTS "${_f}" OR IS_SYMLINK "${_art}")
    fail("mvn install did not put ${_f} into the temporary repository")
  endif()
endforeach()
file(READ "${_art}/attn-${VERSION}.pom" _pom)
string(FIND "${_pom}" "<version>\${revision}" _unresolved)
if(NOT _pom MATCHES "<version>${VERSION}</version>" OR NOT _unresolved EQUAL -1)
  fail("the installed pom does not carry the literal version ${VERSION}:\n${_pom}")
endif()

file(ARCHIVE_EXTRACT INPUT "${JAR}" DESTINATION "${TMP}/jar")
foreach(_f "META-INF/native/${PLATFORM}/libattn.so.0" "META-INF/native/${PLATFORM}/libattn_java.so"
           "org/libattn/NativeLoader.class" "org/libattn/AttnNativeJNI.class")
  if(NOT EXISTS "${TMP}/jar/${_f}")
    fail("the installed jar has no ${_f}")
  endif()
endforeach()
file(READ "${TMP}/jar/META-INF/MANIFEST.MF" _mf)
foreach(_line "Automatic-Module-Name: org.libattn" "Implementation-Version: ${VERSION}")
  string(FIND "${_mf}" "${_line}" _pos)
  if(_pos EQUAL -1)
    fail("the jar's manifest has no line '${_line}':\n${_mf}")
  endif()
endforeach()
file(ARCHIVE_EXTRACT INPUT "${_art}/attn-${VERSION}-javadoc.jar" DESTINATION "${TMP}/javadoc")
file(ARCHIVE_EXTRACT INPUT "${_art}/attn-${VERSION}-sources.jar" DESTINATION "${TMP}/sources")
foreach(_f "${TMP}/javadoc/org/libattn/NativeLoader.html" "${TMP}/javadoc/org/libattn/Attention.html"
           "${TMP}/sources/org/libattn/NativeLoader.java" "${TMP}/sources/org/libattn/AttnNative.java")
  if(NOT EXISTS "${_f}")
    fail("missing from the -javadoc / -sources jar: ${_f}")
  endif()
endforeach()

# ------------------------------------------------------------------------------------------------
# 3. The consumer project, outside both trees, against the installed artifact only.
file(COPY "${SOURCE_DIR}/project/" DESTINATION "${TMP}/app")
run(_ "mvn package of the consumer project" ${_mvn} -f "${TMP}/app/pom.xml" package
  "-Dattn.version=${VERSION}")
set(APP_JAR "${TMP}/app/target/attn-consumer.jar")
if(NOT EXISTS "${APP_JAR}")
  fail("the consumer build did not produce ${APP_JAR}")
endif()
elapsed("consumer project built")

# ------------------------------------------------------------------------------------------------
# 4. One JVM: plain java -cp, nothing else.
set(_java "${JAVA}" -cp "${JAR}:${APP_JAR}" example.App)

function(check_report TEXT WHAT)
  foreach(_line "out[1][0] = 15.0" "libattn ${VERSION} (jar ${VERSION}" "consumer: OK")
    string(FIND "${TEXT}" "${_line}" _pos)
    if(_pos EQUAL -1)
      fail("${WHAT} printed\n${TEXT}\nwithout the line '${_line}'")
    endif()
  endforeach()
  if(NOT TEXT MATCHES "natives: ([^\n]*)/libattn_java.so\n")
    fail("${WHAT} printed no 'natives:' line:\n${TEXT}")
  endif()
  set(_dir "${CMAKE_MATCH_1}")
  foreach(_tree "${BUILD_DIR}" "${SOURCE_DIR}" "${REPO}")
    cmake_path(IS_PREFIX _tree "${_dir}" NORMALIZE _inside)
    if(_inside)
      fail("${WHAT} loaded its natives from ${_dir}, inside ${_tree}")
    endif()
  endforeach()
  if(EXISTS "${_dir}")
    fail("${WHAT}'s extraction directory ${_dir} is still there after the JVM exited")
  endif()
  set(NATIVES_DIR "${_dir}" PARENT_SCOPE)
endfunction()

run(_out "java -cp ... example.App" ${_java})
check_report("${_out}" "the consumer")
message(STATUS "consumer output:\n${_out}")
elapsed("one JVM: natives extracted to ${NATIVES_DIR} and removed")

# ------------------------------------------------------------------------------------------------
# 5. Two JVMs at once. execute_process runs its COMMANDs concurrently; the barrier makes both load
# the library at the same moment. Each writes its report to a file.
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH ${_java}
    --report "${TMP}/report1.txt" --barrier "${TMP}/barrier" --parties 2
  COMMAND "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH ${_java}
    --report "${TMP}/report2.txt" --barrier "${TMP}/barrier" --parties 2
  RESULTS_VARIABLE _rcs OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rcs STREQUAL "0;0")
  fail("two concurrent consumers exited with ${_rcs}\n--- stdout\n${_out}\n--- stderr\n${_err}")
endif()
file(READ "${TMP}/report1.txt" _r1)
file(READ "${TMP}/report2.txt" _r2)
check_report("${_r1}" "concurrent consumer 1")
set(_d1 "${NATIVES_DIR}")
check_report("${_r2}" "concurrent consumer 2")
if(_d1 STREQUAL NATIVES_DIR)
  fail("the two concurrent JVMs used the same directory ${_d1}")
endif()
elapsed("two JVMs at once: ${_d1} and ${NATIVES_DIR}, both OK")

cleanup()
message(STATUS "consumer_java: org.libattn:attn:${VERSION} from a Maven repository works "
               "with plain java -cp (alone and two JVMs at once)")
