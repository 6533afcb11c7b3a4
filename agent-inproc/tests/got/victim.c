/* A library calling libc through its PLT (R_*_JUMP_SLOT): what the GOT
 * patcher must route. Built by tests/got.rs, lazily bound and with
 * -z now -z relro. */
#include <unistd.h>

long victim_write(int fd, const void *buf, unsigned long len) { return write(fd, buf, len); }
long victim_read(int fd, void *buf, unsigned long len) { return read(fd, buf, len); }
int victim_close(int fd) { return close(fd); }
