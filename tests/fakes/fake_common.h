/* Shared bits of the C fake plugins. Each fake is one contract case, named after it; most are
 * built from fake_plugin.c with a different FAKE_* definition, the rest have their own file.
 * FAKE_NAME is the manufacturer key the fake identifies as (its manifest's name). */
#ifndef GPUSTACK_TESTS_FAKES_FAKE_COMMON_H_
#define GPUSTACK_TESTS_FAKES_FAKE_COMMON_H_

#include <gpustack/plugin.h>

#include <stdio.h>
#include <string.h>

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined"
#endif

#define FAKE_STR(literal) \
  { (literal), sizeof(literal) - 1 }

/* Fakes are single-threaded in the tests; a plain static buffer is enough for the message. */
static char fake_error[256];
static size_t fake_error_size;

__attribute__((unused)) static gpustack_status fake_fail(gpustack_status status,
                                                         const char* message) {
  fake_error_size = (size_t)snprintf(fake_error, sizeof fake_error, "%s", message);
  return status;
}

__attribute__((unused)) static gpustack_str fake_last_error_message(void) {
  gpustack_str s;
  s.data = fake_error;
  s.size = fake_error_size;
  return s;
}

__attribute__((unused)) static int fake_str_eq(gpustack_str s, const char* literal) {
  return s.size == strlen(literal) && (s.size == 0 || memcmp(s.data, literal, s.size) == 0);
}

/* The body of gpustack_plugin_negotiate for a plugin that speaks `major`.`minor`. */
__attribute__((unused)) static gpustack_status fake_negotiate(gpustack_negotiate_args* args,
                                                              uint32_t major, uint32_t minor,
                                                              const gpustack_plugin_api* api) {
  if (args == NULL || args->struct_size < GPUSTACK_NEGOTIATE_ARGS_STRUCT_SIZE_V1_0) {
    return GPUSTACK_STATUS_INVALID_ARGUMENT;
  }
  args->plugin_abi_major = major;
  args->plugin_abi_minor = minor;
  if (args->host_abi_major != major) {
    args->api = NULL;
    return GPUSTACK_STATUS_INCOMPATIBLE_VERSION;
  }
  args->api = api;
  return GPUSTACK_STATUS_OK;
}

#endif /* GPUSTACK_TESTS_FAKES_FAKE_COMMON_H_ */
