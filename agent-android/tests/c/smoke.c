/* Uses every function of edge_agent.h; exits non-zero on the first surprise. */
#include "edge_agent.h"

#include <stdio.h>
#include <string.h>

#define CHECK(cond, ...)                        \
    do {                                        \
        if (!(cond)) {                          \
            fprintf(stderr, "smoke: " __VA_ARGS__); \
            fprintf(stderr, "\n");              \
            return 1;                           \
        }                                       \
    } while (0)

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: smoke SPOOL_DIR");
    char err[256];
    uint8_t summary[EDGE_AGENT_SUMMARY_MAX];
    size_t len = 0;

    CHECK(strlen(edge_agent_version()) > 0, "empty version");

    const char *cmd[] = {"sh", "-c", "exit 4"};
    const char *facts[] = {"net=wifi"};
    int rc = edge_agent_trace(cmd, 3, NULL, 0, facts, 1, summary, sizeof summary, &len, err, sizeof err);
    CHECK(rc == EDGE_AGENT_OK, "trace: %d %s", rc, err);
    CHECK(len > 0 && len <= EDGE_AGENT_SUMMARY_MAX, "length %zu", len);

    char json[65536];
    size_t json_len = 0;
    rc = edge_agent_summary_json(summary, len, json, sizeof json, &json_len, err, sizeof err);
    CHECK(rc == EDGE_AGENT_OK, "json: %d %s", rc, err);
    CHECK(strlen(json) == json_len, "json length");
    CHECK(strstr(json, "\"code\":4") != NULL, "exit 4 not in %s", json);
    CHECK(strstr(json, "\"net\":\"wifi\"") != NULL, "fact not in %s", json);

    /* Too small a buffer: EINVAL, the needed length, a cut message. */
    char small[8];
    char tiny_err[16];
    rc = edge_agent_summary_json(summary, len, small, sizeof small, &json_len, tiny_err, sizeof tiny_err);
    CHECK(rc == EDGE_AGENT_EINVAL && json_len == strlen(json), "small buffer: %d", rc);
    CHECK(strlen(tiny_err) == sizeof tiny_err - 1, "message not cut to the buffer");

    char path[4096];
    rc = edge_agent_spool_put(argv[1], summary, len, path, sizeof path, err, sizeof err);
    CHECK(rc == EDGE_AGENT_OK, "spool: %d %s", rc, err);
    CHECK(strncmp(path, argv[1], strlen(argv[1])) == 0, "spooled to %s", path);

    /* Errors: codes and messages, never a crash. */
    rc = edge_agent_trace(NULL, 0, NULL, 0, NULL, 0, summary, sizeof summary, &len, err, sizeof err);
    CHECK(rc == EDGE_AGENT_EINVAL && strstr(err, "argv") != NULL, "NULL argv: %d %s", rc, err);
    const char *empty[] = {""};
    rc = edge_agent_trace(empty, 1, NULL, 0, NULL, 0, summary, sizeof summary, &len, NULL, 0);
    CHECK(rc == EDGE_AGENT_EINVAL, "empty program: %d", rc);
    const char *bad_fact[] = {"no-equals-sign"};
    rc = edge_agent_trace(cmd, 3, NULL, 0, bad_fact, 1, summary, sizeof summary, &len, err, sizeof err);
    CHECK(rc == EDGE_AGENT_EINVAL, "bad fact: %d %s", rc, err);
    const char *only[] = {"no_such_call"};
    rc = edge_agent_trace(cmd, 3, only, 1, NULL, 0, summary, sizeof summary, &len, err, sizeof err);
    CHECK(rc == EDGE_AGENT_EINVAL && strstr(err, "no_such_call") != NULL, "bad syscall: %d %s", rc, err);
    const char *missing[] = {"/nonexistent/edge-agent-smoke"};
    rc = edge_agent_trace(missing, 1, NULL, 0, NULL, 0, summary, sizeof summary, &len, err, sizeof err);
    CHECK(rc == EDGE_AGENT_ETRACE && strstr(err, "edge-agent-smoke") != NULL, "missing program: %d %s", rc, err);
    uint8_t garbage[3] = {1, 2, 3};
    rc = edge_agent_spool_put(argv[1], garbage, sizeof garbage, NULL, 0, err, sizeof err);
    CHECK(rc == EDGE_AGENT_EDECODE, "garbage summary: %d %s", rc, err);
    int status = -1;
    const char *upload_args[] = {"--no-such-flag"};
    rc = edge_agent_upload(upload_args, 1, &status, err, sizeof err);
    CHECK(rc == EDGE_AGENT_EINVAL && strstr(err, "--no-such-flag") != NULL, "upload args: %d %s", rc, err);

    printf("smoke: ok\n");
    return 0;
}
