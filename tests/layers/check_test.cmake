# The layering check, checked: it passes on the tree, and on a copy of the
# tree it fails, naming the cause, for each way to break the layers; the build
# itself fails on an upward include (weft_layers), and a private header of a
# layer above does not even compile.
#
#   cmake -DROOT=SRC -DGRAPH=... -DWORK=DIR -P check_test.cmake
cmake_minimum_required(VERSION 3.25)
set(check ${ROOT}/cmake/check_layers.cmake)

function(run_check root out_rc out_text)
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${root} "-DGRAPH=${GRAPH}" -P ${check}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${o}${e}" PARENT_SCOPE)
endfunction()

function(expect_text text want what)
  string(REGEX REPLACE "[ \n]+" " " flat "${text}")
  string(FIND "${flat}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: the output does not say \"${want}\":\n${text}")
  endif()
endfunction()

# 1. The tree as it is passes.
run_check(${ROOT} rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the tree fails its own layering check:\n${text}")
endif()
expect_text("${text}" "all pointing down" "the tree")
message(STATUS "the tree: ${text}")

# 2. A copy, broken one way at a time, each restored after.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
foreach(part CMakeLists.txt cmake src providers include docs)
  file(COPY ${ROOT}/${part} DESTINATION ${WORK})
endforeach()

function(broken what file search replace want)
  file(READ ${WORK}/${file} before)
  string(FIND "${before}" "${search}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: ${file} no longer has \"${search}\" to break: mend this test")
  endif()
  string(REPLACE "${search}" "${replace}" after "${before}")
  file(WRITE ${WORK}/${file} "${after}")
  run_check(${WORK} rc text)
  file(WRITE ${WORK}/${file} "${before}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what}: the check passed:\n${text}")
  endif()
  expect_text("${text}" "${want}" "${what}")
  message(STATUS "${what}: failed as it must")
endfunction()

set(up "#include \"weft/base/deadline.hpp\"\n#include \"weft/peers/node.hpp\"")
broken("a public header of a layer above" src/base/deadline.cpp
       "#include \"weft/base/deadline.hpp\"" "${up}"
       "src/base/deadline.cpp:3: includes weft/peers/node.hpp, of layer peers, above layer base")
broken("a private header of a layer above" src/bootstrap/side_wire.cpp
       "#include \"side_wire.hpp\"" "#include \"side_wire.hpp\"\n#include \"getinfo.hpp\""
       "includes getinfo.hpp, of layer select, above layer bootstrap (which may include its own and: info, base)")
broken("a layer's public header reaching up" include/weft/fabric/fabric.hpp
       "#include \"weft/info/info.hpp\"" "#include \"weft/info/info.hpp\"\n#include \"weft/groups/group.hpp\""
       "include/weft/fabric/fabric.hpp")
broken("the map lost an arrow" docs/architecture.md
       "- `groups` (`src/groups/`) on: `peers`, `stores`." "- `groups` (`src/groups/`) on: `peers`."
       "layer groups drawn in src/groups/ on [peers]; the build has it in src/groups/ on [peers, stores]")
file(WRITE ${WORK}/src/transfer.cpp "// a file in no layer\n")
run_check(${WORK} rc text)
file(REMOVE ${WORK}/src/transfer.cpp)
if(rc EQUAL 0)
  message(FATAL_ERROR "a file outside every layer: the check passed")
endif()
expect_text("${text}" "src/transfer.cpp: in no layer" "a file outside every layer")
message(STATUS "a file outside every layer: failed as it must")

# 3. The build fails on one: configure the copy (library only), turn an
# include upward, and build. The check's target fails, naming it.
set(build ${WORK}/build)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK} -B ${build} -DWEFT_BUILD_TESTS=OFF
                        -DWEFT_BUILD_EXAMPLES=OFF
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring a copy of the tree failed:\n${o}${e}")
endif()
file(READ ${WORK}/src/base/deadline.cpp before)
string(REPLACE "#include \"weft/base/deadline.hpp\"" "${up}" after "${before}")
file(WRITE ${WORK}/src/base/deadline.cpp "${after}")
execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} --target weft_base
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(rc EQUAL 0)
  message(FATAL_ERROR "the build of layer base passed with an include of layer peers:\n${o}${e}")
endif()
expect_text("${o}${e}" "includes weft/peers/node.hpp, of layer peers, above layer base"
            "the build")
message(STATUS "the build with an upward include: failed as it must, at the check")

# 4. Past the check, the compiler: a private header of a layer above is not
# on a layer's include path (the object alone, which does not run the check).
string(REPLACE "#include \"weft/base/deadline.hpp\"" "#include \"weft/base/deadline.hpp\"\n#include \"getinfo.hpp\""
       after "${before}")
file(WRITE ${WORK}/src/base/deadline.cpp "${after}")
execute_process(COMMAND make -C ${build}/src/base deadline.cpp.o
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
file(WRITE ${WORK}/src/base/deadline.cpp "${before}")
if(rc EQUAL 0)
  message(FATAL_ERROR "src/base/deadline.cpp compiled with a private header of layer select:\n${o}${e}")
endif()
expect_text("${o}${e}" "getinfo.hpp: No such file or directory" "the compiler")
message(STATUS "a private header of a layer above: the compiler does not find it")
file(REMOVE_RECURSE ${WORK})
