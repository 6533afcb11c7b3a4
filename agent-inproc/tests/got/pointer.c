/* A library taking libc's `write` as a function pointer: compiled with
 * -fPIC, the address comes from a GOT entry with R_*_GLOB_DAT (no PLT
 * call of `write` in this object). */
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);

long pointer_write(int fd, const void *buf, unsigned long len)
{
    write_fn volatile call = write;
    return call(fd, buf, len);
}
