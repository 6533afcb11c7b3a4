/*
 * An app taking part in the proactive loop through the C ABI: it loads
 * libagent_android.so with dlopen, takes a directives body naming its
 * "sync" operation for 2 runs, then runs "sync" 4 times and "other" once,
 * each run reading FILE with read(fd, buf, 4096) to its end, and writes each
 * run's summary to OUT_DIR/<n>.summary (n = 1..5, in run order). Runs 1 and
 * 2 must come back as directed full summaries, 3 to 5 as light records
 * (the Rust test reads them). Every refusal is checked first.
 *
 * Run by agent-android/tests/c_abi.rs: app_runs LIBRARY FILE OUT_DIR.
 * Prints "runs: ok" when every check passed.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "edge_agent.h"

typedef int (*begin_fn)(const char *, uint64_t *, char *, size_t);
typedef int (*end_fn)(uint64_t, int32_t, uint8_t *, size_t, size_t *, char *, size_t);
typedef int (*set_fn)(const uint8_t *, size_t, uint32_t *, char *, size_t);

static int failures;

static void check(int ok, const char *what, const char *err) {
    if (!ok) {
        printf("FAIL %s (%s)\n", what, err);
        failures++;
    }
}

static void read_all(const char *path) {
    int fd = open(path, O_RDONLY);
    check(fd >= 0, "open the file", path);
    char buf[4096];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
}

static void save(const char *dir, int n, const uint8_t *bytes, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.summary", dir, n);
    FILE *f = fopen(path, "wb");
    check(f != NULL, "create a summary file", path);
    if (f) {
        check(fwrite(bytes, 1, len, f) == len, "write a summary file", path);
        fclose(f);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: app_runs LIBRARY FILE OUT_DIR\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    begin_fn begin = (begin_fn)dlsym(lib, "edge_agent_run_begin");
    end_fn end = (end_fn)dlsym(lib, "edge_agent_run_end");
    set_fn set = (set_fn)dlsym(lib, "edge_agent_set_directives");
    if (!begin || !end || !set) {
        fprintf(stderr, "missing exports\n");
        return 2;
    }
    char err[512] = "";
    uint8_t summary[EDGE_AGENT_SUMMARY_MAX];
    size_t len = 0;
    uint64_t run = 0;
    uint32_t count = 99;

    /* Refusals. */
    check(begin("", &run, err, sizeof err) == EDGE_AGENT_EINVAL, "an empty name", err);
    check(begin("a\nb", &run, err, sizeof err) == EDGE_AGENT_EINVAL, "a control character", err);
    check(end(12345, 0, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_EINVAL,
          "an unknown handle", err);
    check(strstr(err, "12345") != NULL, "the handle named", err);
    const char *bad = "{\"device_directives\": {}}";
    check(set((const uint8_t *)bad, strlen(bad), &count, err, sizeof err) == EDGE_AGENT_EINVAL,
          "a bad directives body", err);
    check(count == 99, "nothing counted for a bad body", err);

    /* The directive: the next 2 runs of "sync", for a day. */
    char body[512];
    long long until = (long long)(time(NULL) + 86400) * 1000000000LL;
    snprintf(body, sizeof body,
             "{\"group\": \"g\", \"device_directives\": [{\"id\": \"d1\", \"program\": "
             "\"sync\", \"runs\": 2, \"expires_unix_ns\": %lld}]}",
             until);
    check(set((const uint8_t *)body, strlen(body), &count, err, sizeof err) == EDGE_AGENT_OK,
          "the directives", err);
    check(count == 1, "one directive in force", err);

    /* A buffer too small keeps the run open. */
    check(begin("sync", &run, err, sizeof err) == EDGE_AGENT_OK, "begin run 1", err);
    read_all(argv[2]);
    check(end(run, 0, summary, 16, &len, err, sizeof err) == EDGE_AGENT_EINVAL,
          "a small buffer", err);
    check(len == EDGE_AGENT_SUMMARY_MAX, "the length needed", err);
    check(end(run, 0, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_OK,
          "end run 1", err);
    save(argv[3], 1, summary, len);

    /* Run 2 (directed) overlaps run 3 (light: one directed run at a time). */
    uint64_t second = 0, third = 0;
    check(begin("sync", &second, err, sizeof err) == EDGE_AGENT_OK, "begin run 2", err);
    check(begin("sync", &third, err, sizeof err) == EDGE_AGENT_OK, "begin run 3", err);
    read_all(argv[2]);
    check(end(second, 0, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_OK,
          "end run 2", err);
    save(argv[3], 2, summary, len);
    check(end(third, 3, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_OK,
          "end run 3", err);
    save(argv[3], 3, summary, len);
    check(end(third, 3, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_EINVAL,
          "ending a run twice", err);

    /* The directive has given its 2 runs: the 4th is light. */
    check(begin("sync", &run, err, sizeof err) == EDGE_AGENT_OK, "begin run 4", err);
    read_all(argv[2]);
    check(end(run, 0, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_OK,
          "end run 4", err);
    save(argv[3], 4, summary, len);

    /* Another operation: no directive names it. */
    check(begin("other", &run, err, sizeof err) == EDGE_AGENT_OK, "begin run 5", err);
    read_all(argv[2]);
    check(end(run, 0, summary, sizeof summary, &len, err, sizeof err) == EDGE_AGENT_OK,
          "end run 5", err);
    save(argv[3], 5, summary, len);

    if (failures == 0) {
        printf("runs: ok\n");
    }
    return failures == 0 ? 0 : 1;
}
