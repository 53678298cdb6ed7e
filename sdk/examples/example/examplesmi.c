/* A stand-in for the vendor's libexamplesmi.so.1 that simulates EXAMPLESMI_DEVICES cards (0 to
 * 16; default 0). EXAMPLESMI_LOST=<index> makes that card answer EXSMI_ERROR_LOST, as a card
 * that fell off the bus does. A real vendor ships this library with its driver. */
#include "examplesmi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int initialized;
static uint32_t devices;

static long env_number(const char* name, long fallback) {
  const char* text = getenv(name);
  if (text == NULL || *text == '\0') return fallback;
  char* end = NULL;
  long value = strtol(text, &end, 10);
  return *end == '\0' ? value : fallback;
}

static int check(uint32_t index) {
  if (!initialized) return EXSMI_ERROR_NOT_INITIALIZED;
  if (index >= devices) return EXSMI_ERROR_INVALID_ARGUMENT;
  if (env_number("EXAMPLESMI_LOST", -1) == (long)index) return EXSMI_ERROR_LOST;
  return EXSMI_OK;
}

int exsmi_init(void) {
  long count = env_number("EXAMPLESMI_DEVICES", 0);
  devices = count < 0 ? 0 : count > 16 ? 16 : (uint32_t)count;
  initialized = 1;
  return EXSMI_OK;
}

int exsmi_device_count(uint32_t* count) {
  if (!initialized) return EXSMI_ERROR_NOT_INITIALIZED;
  if (count == NULL) return EXSMI_ERROR_INVALID_ARGUMENT;
  *count = devices;
  return EXSMI_OK;
}

int exsmi_device_info_get(uint32_t index, exsmi_device_info* info) {
  int status = check(index);
  if (status != EXSMI_OK || info == NULL)
    return info == NULL ? EXSMI_ERROR_INVALID_ARGUMENT : status;
  memset(info, 0, sizeof *info);
  snprintf(info->uuid, sizeof info->uuid, "EXAMPLE-1b36-%u", (unsigned)index);
  snprintf(info->name, sizeof info->name, "Example Accelerator 8G");
  snprintf(info->bus_id, sizeof info->bus_id, "0000:00:%02x.0", (unsigned)(5 + index));
  info->memory_mib = 8192;
  info->cores = 1024;
  info->minor = index;
  return EXSMI_OK;
}

int exsmi_device_usage_get(uint32_t index, exsmi_device_usage* usage) {
  int status = check(index);
  if (status != EXSMI_OK || usage == NULL)
    return usage == NULL ? EXSMI_ERROR_INVALID_ARGUMENT : status;
  usage->memory_used_mib = 512;
  usage->utilization_percent = 25;
  usage->temperature_celsius = -300; /* no sensor: the plugin leaves temperature unmeasured */
  return EXSMI_OK;
}

const char* exsmi_error_string(int code) {
  switch (code) {
    case EXSMI_OK:
      return "success";
    case EXSMI_ERROR_NOT_INITIALIZED:
      return "not initialized";
    case EXSMI_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case EXSMI_ERROR_LOST:
      return "the card fell off the bus";
    default:
      return "unknown error";
  }
}
