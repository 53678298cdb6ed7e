# Writes OUTPUT: a .cc whose EmbeddedCrds() returns the text of each file in INPUTS (a ;-list).
set(body "")
foreach(file IN LISTS INPUTS)
  file(READ "${file}" text)
  string(APPEND body "      R\"gpustack_crd(${text})gpustack_crd\",\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from crds/ by host/api/embed_crds.cmake. Do not edit.
#include \"host/api/embedded_crds.h\"

namespace gpustack::api {

std::vector<std::string_view> EmbeddedCrds() {
  return {
${body}  };
}

}  // namespace gpustack::api
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
