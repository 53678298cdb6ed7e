/* examplesmi: the management library of the "Example Accelerator", as a vendor would ship it.
 * The example plugin never links it: it opens libexamplesmi.so.1 at run time and takes the types
 * and names below from this header. examplesmi.c is a stand-in that simulates the cards, so the
 * example runs anywhere (EXAMPLESMI_DEVICES=<n> in the environment says how many). */
#ifndef EXAMPLESMI_H_
#define EXAMPLESMI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EXSMI_OK 0
#define EXSMI_ERROR_NOT_INITIALIZED 1
#define EXSMI_ERROR_INVALID_ARGUMENT 2
#define EXSMI_ERROR_LOST 3 /* the card fell off the bus */

typedef struct exsmi_device_info {
  char uuid[48];       /* "EXAMPLE-1b36-0" */
  char name[64];       /* "Example Accelerator 8G" */
  char bus_id[16];     /* "0000:00:05.0" */
  uint64_t memory_mib; /* VRAM */
  uint32_t cores;      /* compute cores */
  uint32_t minor;      /* /dev/exaccel<minor> */
} exsmi_device_info;

typedef struct exsmi_device_usage {
  uint64_t memory_used_mib;
  uint32_t utilization_percent;
  int32_t temperature_celsius; /* below -273: the card has no sensor */
} exsmi_device_usage;

int exsmi_init(void);
int exsmi_device_count(uint32_t* count);
int exsmi_device_info_get(uint32_t index, exsmi_device_info* info);
int exsmi_device_usage_get(uint32_t index, exsmi_device_usage* usage);
const char* exsmi_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* EXAMPLESMI_H_ */
