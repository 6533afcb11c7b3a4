/*
 * One phone's app in the proactive loop, through the C ABI: fetches its
 * per-device directives from the service, runs its "sync" operation RUNS
 * times (each reads FILE with read(fd, buf, 4096) and sleeps SLEEP_MS), puts
 * each run's summary into its spool and uploads the spool once.
 *
 * Run by tests/tests/app_proactive.rs:
 *   app_device LIBRARY SPOOL SERVER TOKEN_FILE RUNS SLEEP_MS FILE
 * Prints "directives: N" after the fetch and "sizes: ..." (each run's
 * summary, bytes); exits non-zero when a call fails.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "edge_agent.h"

typedef int (*fetch_fn)(const char *, const char *, const char *, const char *, uint32_t *,
                        char *, size_t);
typedef int (*begin_fn)(const char *, uint64_t *, char *, size_t);
typedef int (*end_fn)(uint64_t, int32_t, uint8_t *, size_t, size_t *, char *, size_t);
typedef int (*put_fn)(const char *, const uint8_t *, size_t, char *, size_t, char *, size_t);
typedef int (*upload_fn)(const char *const *, size_t, int *, char *, size_t);

static void *need(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "missing export %s\n", name);
        exit(2);
    }
    return f;
}

static void ok(int rc, const char *what, const char *err) {
    if (rc != EDGE_AGENT_OK) {
        fprintf(stderr, "%s failed (%d): %s\n", what, rc, err);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: app_device LIBRARY SPOOL SERVER TOKEN_FILE RUNS SLEEP_MS FILE\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    fetch_fn fetch = (fetch_fn)need(lib, "edge_agent_fetch_directives");
    begin_fn begin = (begin_fn)need(lib, "edge_agent_run_begin");
    end_fn end = (end_fn)need(lib, "edge_agent_run_end");
    put_fn put = (put_fn)need(lib, "edge_agent_spool_put");
    upload_fn upload = (upload_fn)need(lib, "edge_agent_upload");
    const char *spool = argv[2], *server = argv[3], *token = argv[4], *file = argv[7];
    int runs = atoi(argv[5]);
    long sleep_ms = atol(argv[6]);
    char err[512] = "";
    uint32_t count = 0;
    ok(fetch(spool, server, token, NULL, &count, err, sizeof err), "fetch directives", err);
    printf("directives: %u\n", count);
    printf("sizes:");
    for (int i = 0; i < runs; i++) {
        uint64_t run = 0;
        ok(begin("sync", &run, err, sizeof err), "run begin", err);
        int fd = open(file, O_RDONLY);
        if (fd < 0) {
            perror(file);
            return 1;
        }
        char buf[4096];
        while (read(fd, buf, sizeof buf) > 0) {
        }
        close(fd);
        struct timespec pause = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
        uint8_t summary[EDGE_AGENT_SUMMARY_MAX];
        size_t len = 0;
        ok(end(run, 0, summary, sizeof summary, &len, err, sizeof err), "run end", err);
        char path[4096];
        ok(put(spool, summary, len, path, sizeof path, err, sizeof err), "spool put", err);
        printf(" %zu", len);
    }
    printf("\n");
    if (runs > 0) {
        const char *args[] = {"--spool", spool, "--server", server, "--token-file", token,
                              "--now", "--once"};
        int status = -1;
        ok(upload(args, sizeof args / sizeof args[0], &status, err, sizeof err), "upload", err);
        if (status != 0) {
            fprintf(stderr, "upload exit status %d\n", status);
            return 1;
        }
    }
    return 0;
}
