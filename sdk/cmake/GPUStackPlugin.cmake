# gpustack_add_plugin(<target> NAME <manufacturer-key> PCI_VENDOR_IDS <0xNNNN>...
#                     SOURCES <files>... [OUTPUT_DIRECTORY <dir>] [ABI_MAJOR <n>] [ABI_MINOR <n>])
#
# Builds a GPUStack plugin the way the host expects it: a MODULE library named
# libgpustack_plugin_<name>.so with hidden visibility that exports only gpustack_plugin_negotiate
# (version script), links with --no-undefined and -z now, and a manifest <name>.json beside it.
# ABI_MAJOR/ABI_MINOR default to the header's; tests override them to build mismatching manifests.
set(_gpustack_plugin_cmake_dir "${CMAKE_CURRENT_LIST_DIR}")

function(gpustack_add_plugin target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "NAME;OUTPUT_DIRECTORY;ABI_MAJOR;ABI_MINOR"
                        "PCI_VENDOR_IDS;SOURCES")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "gpustack_add_plugin(${target}): NAME and SOURCES are required")
  endif()
  if(NOT arg_NAME MATCHES "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
    message(FATAL_ERROR "gpustack_add_plugin(${target}): NAME '${arg_NAME}' must be [a-z0-9-]")
  endif()
  if(NOT arg_OUTPUT_DIRECTORY)
    set(arg_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  if(NOT DEFINED arg_ABI_MAJOR OR NOT DEFINED arg_ABI_MINOR)
    # Read the version from the header itself, so the manifest can never drift from it.
    get_target_property(include_dirs GPUStack::plugin_abi INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS include_dirs)
      string(REGEX REPLACE "^\\$<BUILD_INTERFACE:(.*)>$" "\\1" dir "${dir}")
      if(EXISTS "${dir}/gpustack/plugin.h")
        file(STRINGS "${dir}/gpustack/plugin.h" major REGEX "#define GPUSTACK_PLUGIN_ABI_MAJOR ")
        file(STRINGS "${dir}/gpustack/plugin.h" minor REGEX "#define GPUSTACK_PLUGIN_ABI_MINOR ")
        string(REGEX REPLACE ".* ([0-9]+)$" "\\1" major "${major}")
        string(REGEX REPLACE ".* ([0-9]+)$" "\\1" minor "${minor}")
        break()
      endif()
    endforeach()
    if(NOT DEFINED arg_ABI_MAJOR)
      set(arg_ABI_MAJOR "${major}")
    endif()
    if(NOT DEFINED arg_ABI_MINOR)
      set(arg_ABI_MINOR "${minor}")
    endif()
  endif()

  add_library(${target} MODULE ${arg_SOURCES})
  # A project without C++ (a plugin in C) gets plugin.h alone, without the C++20 requirement.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CXX" IN_LIST languages)
    target_link_libraries(${target} PRIVATE GPUStack::plugin_sdk)
  else()
    target_link_libraries(${target} PRIVATE GPUStack::plugin_abi)
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "gpustack_plugin_${arg_NAME}"
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${arg_OUTPUT_DIRECTORY}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${_gpustack_plugin_cmake_dir}/gpustack_plugin.map")
  target_link_options(${target} PRIVATE
    "-Wl,--version-script=${_gpustack_plugin_cmake_dir}/gpustack_plugin.map"
    -Wl,--no-undefined -Wl,-z,now)

  set(ids "")
  foreach(id IN LISTS arg_PCI_VENDOR_IDS)
    list(APPEND ids "\"${id}\"")
  endforeach()
  list(JOIN ids ", " GPUSTACK_MANIFEST_VENDOR_IDS)
  set(GPUSTACK_MANIFEST_NAME "${arg_NAME}")
  set(GPUSTACK_MANIFEST_LIBRARY "libgpustack_plugin_${arg_NAME}.so")
  set(GPUSTACK_MANIFEST_ABI_MAJOR "${arg_ABI_MAJOR}")
  set(GPUSTACK_MANIFEST_ABI_MINOR "${arg_ABI_MINOR}")
  configure_file("${_gpustack_plugin_cmake_dir}/manifest.json.in"
                 "${arg_OUTPUT_DIRECTORY}/${arg_NAME}.json" @ONLY)
  set_property(TARGET ${target} PROPERTY GPUSTACK_MANIFEST "${arg_OUTPUT_DIRECTORY}/${arg_NAME}.json")
endfunction()
