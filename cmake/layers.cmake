# weft's layers: one folder of src/ (or providers/) each, built as one CMake
# object library that links the layers it stands on, and only those. A layer's
# private headers sit in its folder, which only the layer and the layers above
# it (its dependents) have on their include path: a private include that runs
# back up a layer fails to compile. Every include, public headers' too, is
# also read by cmake/check_layers.cmake on every build (weft_layers): an
# include of a layer not below fails the build, naming the file and line.
# docs/architecture.md draws the same graph; the check holds it to this one.
#
#   weft_layer(NAME [DEPENDS LAYER...] [LIBS LIB...] SOURCES FILE...)
#
# DEPENDS: the layers directly below (those below them come along). LIBS:
# libraries its sources use (fmt, curl...). The library libweft is every
# layer's objects (weft_library below).

define_property(GLOBAL PROPERTY WEFT_LAYERS BRIEF_DOCS "weft's layers, bottom up"
                FULL_DOCS "cmake/layers.cmake")

function(weft_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPENDS;LIBS;SOURCES")
  add_library(weft_${name} OBJECT ${arg_SOURCES})
  target_include_directories(weft_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(weft_${name} PUBLIC weft_interface)
  foreach(dep IN LISTS arg_DEPENDS)
    get_property(known GLOBAL PROPERTY WEFT_LAYERS)
    if(NOT dep IN_LIST known)
      message(FATAL_ERROR "weft layer ${name}: DEPENDS ${dep}, which is not a layer below it "
                          "(layers are declared bottom up: ${known})")
    endif()
    target_link_libraries(weft_${name} PUBLIC weft_${dep})
  endforeach()
  target_link_libraries(weft_${name} PRIVATE ${arg_LIBS} weft_flags)
  target_compile_options(weft_${name} PRIVATE ${weft_warnings})
  set_target_properties(weft_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # A unity build (weft.sh asks for one): each batch parses the headers once
  # (under ASan+UBSan the library compiled in 89 s instead of about 3.5 min on
  # 2 cores).
  if(WEFT_UNITY_LIBRARY)
    set_target_properties(weft_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  add_dependencies(weft_${name} weft_layers)
  file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set_property(GLOBAL APPEND PROPERTY WEFT_LAYERS ${name})
  string(REPLACE ";" "," deps "${arg_DEPENDS}")
  set_property(GLOBAL APPEND PROPERTY WEFT_LAYER_GRAPH "${name}:${dir}:${deps}")
endfunction()

# libweft: the layers' objects, one library; its include path is the public
# headers' alone (include/), as installed.
function(weft_library)
  get_property(layers GLOBAL PROPERTY WEFT_LAYERS)
  set(objects)
  foreach(layer IN LISTS layers)
    list(APPEND objects $<TARGET_OBJECTS:weft_${layer}>)
  endforeach()
  add_library(weft ${objects})
  add_library(weft::weft ALIAS weft)
  set_target_properties(weft PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION 0
                        POSITION_INDEPENDENT_CODE ON LINKER_LANGUAGE CXX)
  target_link_libraries(weft PUBLIC $<BUILD_INTERFACE:weft_interface>)
  target_include_directories(weft PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(weft PUBLIC cxx_std_20)
  target_link_libraries(weft PUBLIC PkgConfig::LIBFABRIC Threads::Threads)
  foreach(layer IN LISTS layers)
    get_target_property(libs weft_${layer} LINK_LIBRARIES)
    foreach(lib IN LISTS libs)
      if(NOT lib MATCHES "^weft_")
        target_link_libraries(weft PRIVATE ${lib})
      endif()
    endforeach()
  endforeach()
  target_link_libraries(weft PRIVATE $<BUILD_INTERFACE:weft_flags>)
  target_link_libraries(weft INTERFACE $<BUILD_INTERFACE:weft_flags>)
  # Calls from one of libweft's files into another bind inside the library,
  # not through the PLT: the same-host lane's data path crosses layers (peers
  # to lane) on every operation. Nobody interposes weft's functions.
  if(BUILD_SHARED_LIBS)
    target_link_options(weft PRIVATE -Wl,-Bsymbolic-functions)
  endif()

  # What looks inside the library (the weft program, white-box tests, benches):
  # every layer's private headers by name ("traits.hpp"), no objects (those
  # are libweft's).
  add_library(weft_internals INTERFACE)
  foreach(layer IN LISTS layers)
    get_target_property(dir weft_${layer} SOURCE_DIR)
    target_include_directories(weft_internals INTERFACE ${dir})
  endforeach()

  # The layering check: reads every include of src/, providers/ and include/
  # on every build that changed one, against the layers declared above and
  # docs/architecture.md's map.
  get_property(graph GLOBAL PROPERTY WEFT_LAYER_GRAPH)
  string(REPLACE ";" "|" graph_arg "${graph}")
  file(GLOB_RECURSE watched CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/*.cpp ${PROJECT_SOURCE_DIR}/src/*.hpp
       ${PROJECT_SOURCE_DIR}/providers/*.cpp ${PROJECT_SOURCE_DIR}/providers/*.hpp
       ${PROJECT_SOURCE_DIR}/include/*.hpp ${PROJECT_SOURCE_DIR}/include/*.inl
       ${PROJECT_SOURCE_DIR}/docs/architecture.md)
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/weft_layers.stamp)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} "-DGRAPH=${graph_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${watched} ${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake
    COMMENT "Checking that every include points down a layer"
    VERBATIM)
  add_custom_target(weft_layers DEPENDS ${stamp})
  set(WEFT_LAYER_GRAPH_ARG "${graph_arg}" CACHE INTERNAL "weft's layers, for the check's tests")
endfunction()
