/*
 * Edge Agent: C ABI of libagent_android (agent-android crate).
 *
 * Link against libagent_android.so (cdylib) or libagent_android.a
 * (staticlib). Every function returns EDGE_AGENT_OK (0) or a negative
 * EDGE_AGENT_E* code; on failure it writes a NUL-terminated message into
 * `err` (which may be NULL when `err_cap` is 0). Output goes into buffers the
 * caller owns: nothing is allocated for the caller, nothing needs freeing.
 * The functions are thread-safe; edge_agent_trace blocks until the traced
 * program exits (call it off any UI thread).
 *
 * Keep in step with agent-android/src/ffi.rs.
 */
#ifndef EDGE_AGENT_H
#define EDGE_AGENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An encoded summary is at most this many bytes. */
#define EDGE_AGENT_SUMMARY_MAX 2048

#define EDGE_AGENT_OK 0
#define EDGE_AGENT_EINVAL (-1)    /* invalid argument, buffer too small */
#define EDGE_AGENT_ETRACE (-2)    /* the command could not be traced */
#define EDGE_AGENT_EDECODE (-3)   /* bytes are not a valid summary */
#define EDGE_AGENT_ESPOOL (-4)    /* the spool refused the summary */
#define EDGE_AGENT_EUPLOAD (-5)   /* the uploader failed */
#define EDGE_AGENT_EINTERNAL (-6) /* a bug in the library (caught panic) */
#define EDGE_AGENT_ESTATE (-7)    /* observing already, not yet, or no more */
#define EDGE_AGENT_EOBSERVE (-8)  /* this process cannot be observed */

/* window_s of edge_agent_start_self: one summary per snapshot, no windows. */
#define EDGE_AGENT_NO_WINDOW UINT32_MAX

/* The library's version (static string, do not free). */
const char *edge_agent_version(void);

/*
 * Traces argv[0..argc) (argv[0] is looked up in PATH) to its end and writes
 * its encoded summary (at most EDGE_AGENT_SUMMARY_MAX bytes) into
 * summary[0..*summary_len).
 *   only:  NULL for every syscall, or n_only syscall names ("read", ...).
 *   facts: NULL, or n_facts "key=value" free facts for the summary.
 * On Android the device's facts (model, release, SDK) are added from system
 * properties.
 */
int edge_agent_trace(const char *const *argv, size_t argc,
                     const char *const *only, size_t n_only,
                     const char *const *facts, size_t n_facts,
                     uint8_t *summary, size_t summary_cap, size_t *summary_len,
                     char *err, size_t err_cap);

/*
 * Puts an encoded summary into the spool directory (created if missing) and
 * writes the new file's path into `path` (NULL with path_cap 0 to skip).
 */
int edge_agent_spool_put(const char *spool_dir,
                         const uint8_t *summary, size_t summary_len,
                         char *path, size_t path_cap,
                         char *err, size_t err_cap);

/*
 * Writes the JSON view of an encoded summary (as `edge-agent show --json`)
 * into `json`, NUL-terminated, and its length into *json_len. If json_cap is
 * too small, returns EDGE_AGENT_EINVAL with the needed length in *json_len.
 */
int edge_agent_summary_json(const uint8_t *summary, size_t summary_len,
                            char *json, size_t json_cap, size_t *json_len,
                            char *err, size_t err_cap);

/*
 * Runs the uploader with `edge-agent upload`'s arguments, without the program
 * name (e.g. "--spool", dir, "--server", url, "--token-file", f, "--now",
 * "--once"), and writes its exit status (0: all sent) into *status.
 */
int edge_agent_upload(const char *const *argv, size_t argc, int *status,
                      char *err, size_t err_cap);

/*
 * The app observes itself (docs/android-arm.md, "App observes itself").
 *
 * Begins observing this process's libc calls (every thread, every library
 * loaded now or later, by GOT patching):
 *   only:     NULL for every syscall, or comma-separated names ("read,write").
 *   window_s: window length in seconds, 1 to 86400, or EDGE_AGENT_NO_WINDOW.
 * Errors: EDGE_AGENT_EINVAL (unknown names, named in the message; a bad
 * window), EDGE_AGENT_ESTATE (observing already, or stopped: a stop is
 * final), EDGE_AGENT_EOBSERVE (the GOT patcher refused; nothing installed).
 */
int edge_agent_start_self(const char *only, uint32_t window_s,
                          char *err, size_t err_cap);

/*
 * Writes the encoded summary (at most EDGE_AGENT_SUMMARY_MAX bytes) of what
 * was observed since the last snapshot (or the start) into
 * summary[0..*summary_len), ready for edge_agent_spool_put. If summary_cap
 * is too small: EDGE_AGENT_EINVAL with the needed length in *summary_len;
 * the summary is kept for the next call. Before a start: EDGE_AGENT_ESTATE.
 */
int edge_agent_snapshot_self(uint8_t *summary, size_t summary_cap,
                             size_t *summary_len, char *err, size_t err_cap);

/*
 * Stops observing: the wrappers pass straight through (each call still costs
 * one indirect call and one atomic load: the GOT entries stay patched).
 * What was observed before can still be snapshot. Before a start:
 * EDGE_AGENT_ESTATE.
 */
int edge_agent_stop_self(char *err, size_t err_cap);

/*
 * The proactive loop inside the app (docs/proactive.md, "Inside an app").
 *
 * Begins one run of an operation worth comparing across devices; name (1 to
 * 255 bytes) is the program the service groups runs by. Nothing is
 * recorded until the run's end unless a per-device directive takes the run:
 * then the whole process's libc calls are observed in full until its end.
 * Errors: EDGE_AGENT_EINVAL (bad name), EDGE_AGENT_ESTATE (256 runs open).
 */
int edge_agent_run_begin(const char *name, uint64_t *run, char *err, size_t err_cap);

/*
 * Ends run `run` with the app's outcome (status 0: succeeded; any other
 * value: failed) and writes its encoded summary into
 * summary[0..*summary_len) for edge_agent_spool_put: a light record
 * (duration, outcome, the process's CPU time and I/O bytes over the run),
 * or a directed run's full summary with the fact directive=ID. summary_cap
 * must be at least EDGE_AGENT_SUMMARY_MAX (else EDGE_AGENT_EINVAL, the run
 * stays open). Unknown handle: EDGE_AGENT_EINVAL.
 */
int edge_agent_run_end(uint64_t run, int32_t status, uint8_t *summary, size_t summary_cap,
                       size_t *summary_len, char *err, size_t err_cap);

/*
 * Takes a body of GET /v1/directives?device=ID that the app fetched itself;
 * *count: the per-device directives in force. A bad body is refused whole
 * (EDGE_AGENT_EINVAL, named) and the directives known stay.
 */
int edge_agent_set_directives(const uint8_t *body, size_t len, uint32_t *count,
                              char *err, size_t err_cap);

/*
 * Fetches this device's directives (its id kept beside spool_dir) from
 * server and takes them; token_file and ca_file may be NULL. Blocks for the
 * request. Errors: EDGE_AGENT_EINVAL, EDGE_AGENT_EUPLOAD (the request).
 */
int edge_agent_fetch_directives(const char *spool_dir, const char *server,
                                const char *token_file, const char *ca_file,
                                uint32_t *count, char *err, size_t err_cap);

#ifdef __cplusplus
}
#endif

#endif /* EDGE_AGENT_H */
