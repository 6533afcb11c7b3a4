/* A library that loads others with dlopen through its PLT: after
 * install, its dlopen goes through the patcher's dlopen hook. */
#include <dlfcn.h>

void *loader_dlopen(const char *path, int flags) { return dlopen(path, flags); }
