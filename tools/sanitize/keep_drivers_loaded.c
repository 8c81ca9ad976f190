// Preloaded by tools/test.sh --sanitize: dlclose() leaves graphics drivers and layers mapped.
// The Vulkan loader unloads the ICDs (lavapipe, radv, anv) and layers at vkDestroyInstance, and
// libglvnd unloads Mesa's GL driver (kiln-debug) at exit; memory they keep in globals for the
// process's life (Mesa's CPU-topology masks) then looks leaked to LeakSanitizer, from frames it can
// no longer name (<unknown module>). Kept mapped, their globals stay roots and their frames keep the
// library's name, so tools/sanitize/lsan.supp can name a driver precisely. Every other dlclose runs.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

static int is_graphics_driver(const char* path) {
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const size_t n = strlen(base);
  return strncmp(base, "libvulkan_", 10) == 0 || strncmp(base, "libVkLayer_", 11) == 0 ||
         strncmp(base, "libGL", 5) == 0 || strncmp(base, "libEGL", 6) == 0 ||
         (n > 7 && strcmp(base + n - 7, "_dri.so") == 0);
}

int dlclose(void* handle) {
  static int (*real_dlclose)(void*);
  if (!real_dlclose) real_dlclose = (int (*)(void*))dlsym(RTLD_NEXT, "dlclose");
  struct link_map* map = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
      is_graphics_driver(map->l_name))
    return 0;
  return real_dlclose(handle);
}
