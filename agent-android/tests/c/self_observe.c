/*
 * An app observing itself through the C ABI, as a native app would: load
 * libagent_android.so with dlopen, start, read a file with read(fd, buf,
 * 4096) in a loop, snapshot into a file. Every refusal first: each must
 * return its code and install nothing (this program's GOT entry of read
 * still holds libc's read).
 *
 * Run by agent-android/tests/c_abi.rs: self_observe LIBRARY FILE SUMMARY_OUT.
 * Prints "self: ok" when every check passed.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "edge_agent.h"

typedef int (*start_fn)(const char *, uint32_t, char *, size_t);
typedef int (*snapshot_fn)(uint8_t *, size_t, size_t *, char *, size_t);
typedef int (*stop_fn)(char *, size_t);

static int failures;

static void check(int ok, const char *what, const char *err) {
    if (!ok) {
        printf("FAIL %s (%s)\n", what, err);
        failures++;
    }
}

/* What this program's GOT entry of read holds now (loaded at each call:
 * built without optimization). */
__attribute__((noinline)) static void *read_entry(void) {
    return (void *)&read;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: self_observe LIBRARY FILE SUMMARY_OUT\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    start_fn start = (start_fn)dlsym(lib, "edge_agent_start_self");
    snapshot_fn snapshot = (snapshot_fn)dlsym(lib, "edge_agent_snapshot_self");
    stop_fn stop = (stop_fn)dlsym(lib, "edge_agent_stop_self");
    if (!start || !snapshot || !stop) {
        fprintf(stderr, "missing exports\n");
        return 2;
    }
    void *libc_read = dlsym(RTLD_DEFAULT, "read");
    char err[512] = "";
    uint8_t summary[EDGE_AGENT_SUMMARY_MAX];
    size_t len = 0;

    /* Refusals, before any start. */
    check(snapshot(summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_ESTATE,
          "snapshot before start", err);
    check(strstr(err, "startSelf") != NULL, "the message says to start first", err);
    check(stop(err, sizeof err) == EDGE_AGENT_ESTATE, "stop before start", err);
    check(start("read,nope,zilch", EDGE_AGENT_NO_WINDOW, err, sizeof err) == EDGE_AGENT_EINVAL,
          "unknown names", err);
    check(strstr(err, "nope") && strstr(err, "zilch"), "both unknown names named", err);
    check(start(NULL, 0, err, sizeof err) == EDGE_AGENT_EINVAL, "window 0", err);
    check(start(NULL, 86401, err, sizeof err) == EDGE_AGENT_EINVAL, "window of a day and 1 s", err);
    check(read_entry() == libc_read, "nothing installed by the refused starts", "");

    /* Observing. */
    check(start(NULL, EDGE_AGENT_NO_WINDOW, err, sizeof err) == EDGE_AGENT_OK, "start", err);
    check(read_entry() != libc_read, "read's GOT entry routed to the wrapper", "");
    check(start(NULL, EDGE_AGENT_NO_WINDOW, err, sizeof err) == EDGE_AGENT_ESTATE, "second start", err);
    check(strstr(err, "already observing this process") != NULL, "second start's message", err);
    int fd = open(argv[2], O_RDONLY);
    check(fd >= 0, "open the file", argv[2]);
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
    }
    check(n == 0, "read to the end", "");
    close(fd);

    /* A forked child is not the observed process: its snapshot is refused
     * (and its reads are not the parent's). */
    pid_t child = fork();
    if (child == 0) {
        char cbuf[4096];
        int cfd = open(argv[2], O_RDONLY);
        while (cfd >= 0 && read(cfd, cbuf, sizeof cbuf) > 0) {
        }
        int code = snapshot(summary, sizeof summary, &len, err, sizeof err);
        int refused = code == EDGE_AGENT_ESTATE && strstr(err, "fork") != NULL;
        code = start(NULL, EDGE_AGENT_NO_WINDOW, err, sizeof err);
        refused = refused && code == EDGE_AGENT_ESTATE && strstr(err, "fork") != NULL;
        _exit(refused ? 0 : 1);
    }
    int status = -1;
    check(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "the child's snapshot and start are refused", "");

    /* A buffer too small: the size needed, nothing consumed. */
    check(snapshot(summary, 8, &len, err, sizeof err) == EDGE_AGENT_EINVAL, "small buffer", err);
    check(len > 8 && len <= EDGE_AGENT_SUMMARY_MAX, "the size needed is said", err);
    size_t needed = len;
    check(snapshot(summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_OK, "snapshot", err);
    check(len == needed, "the kept summary is the one handed out", "");
    FILE *out = fopen(argv[3], "wb");
    check(out && fwrite(summary, 1, len, out) == len && fclose(out) == 0, "write the summary", argv[3]);

    check(stop(err, sizeof err) == EDGE_AGENT_OK, "stop", err);
    check(start(NULL, EDGE_AGENT_NO_WINDOW, err, sizeof err) == EDGE_AGENT_ESTATE, "start after stop", err);
    if (failures == 0) {
        printf("self: ok\n");
    }
    return failures == 0 ? 0 : 1;
}
