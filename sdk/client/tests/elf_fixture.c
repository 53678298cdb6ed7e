/* A shared library with a known export table, for the ELF reader's tests. */
__attribute__((visibility("default"))) int gpustack_plugin_negotiate(void* args) {
  return args == 0;
}
__attribute__((visibility("default"))) int another_export = 7;
__attribute__((visibility("hidden"))) int hidden_helper(void) { return 1; }
static int file_local(void) { return hidden_helper(); }
__attribute__((visibility("default"))) int uses_local(void) { return file_local(); }
