package dev.edgeagent;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Java wrapper of libagent_android (the agent-android crate's cdylib).
 *
 * <p>Typical use in an app, off the UI thread:
 * <pre>{@code
 * EdgeAgent.loadLibrary();
 * byte[] summary = EdgeAgent.trace(new String[] {nativeLibraryDir + "/libworkload.so", "--fetch"},
 *         null, Map.of("net", "wifi"));
 * EdgeAgent.spoolPut(EdgeAgent.spoolDir(context.getNoBackupFilesDir()), summary);
 * }</pre>
 * and {@code UploadWorker} (android/) sends the spool when the app's
 * WorkManager constraints (unmetered, charging, idle) hold.
 *
 * <p>Android (targetSdk 29 and later) does not execute files from app data:
 * a traced program must ship in the APK's native-library folder as
 * {@code lib<name>.so} (with {@code android:extractNativeLibs="true"}) or be
 * part of the system image.
 *
 * <p>{@link #trace} runs the tracer inside the app's process. While it runs, the
 * tracer waits for any child of the process, so a process the app starts meanwhile
 * (Runtime.exec, ProcessBuilder) may be reaped by it and its exit status lost: do not
 * start other processes during a trace, or run {@code libedge_agent.so run --out FILE
 * -- ...} as a process of its own instead.
 *
 * <p>Errors never crash the app: invalid arguments throw
 * {@link IllegalArgumentException}; everything else throws
 * {@link EdgeAgentException} with a message.
 */
public final class EdgeAgent {
    /** The library's name for {@link System#loadLibrary}: libagent_android.so. */
    public static final String LIBRARY = "agent_android";

    private EdgeAgent() {}

    /** Loads libagent_android from the app's native-library folder (or java.library.path). */
    public static void loadLibrary() {
        System.loadLibrary(LIBRARY);
    }

    /** Loads the library from an absolute path. */
    public static void load(File library) {
        System.load(library.getAbsolutePath());
    }

    /** The library's version. */
    public static String version() {
        return nativeVersion();
    }

    /**
     * Traces {@code argv} to its end and returns the encoded summary (at most 2048 bytes).
     *
     * @param argv the command; {@code argv[0]} is looked up in PATH
     * @param only trace only these syscalls ("read", "connect", ...), or null for all
     * @param facts free facts recorded in the summary (keys: 1-24 of [A-Za-z0-9._-]), or null
     */
    public static byte[] trace(String[] argv, String[] only, Map<String, String> facts)
            throws EdgeAgentException {
        if (argv == null) {
            throw new IllegalArgumentException("argv is null");
        }
        String[] factArray = null;
        if (facts != null) {
            List<String> list = new ArrayList<>();
            for (Map.Entry<String, String> fact : facts.entrySet()) {
                if (fact.getKey() == null || fact.getValue() == null) {
                    throw new IllegalArgumentException("fact keys and values must not be null");
                }
                if (fact.getKey().indexOf('=') >= 0) {
                    throw new IllegalArgumentException("fact key " + fact.getKey() + " contains '='");
                }
                list.add(fact.getKey() + "=" + fact.getValue());
            }
            factArray = list.toArray(new String[0]);
        }
        return nativeTrace(argv, only, factArray);
    }

    /** The app-private spool folder under {@code filesDir} (use getNoBackupFilesDir()). */
    public static File spoolDir(File filesDir) {
        return new File(new File(filesDir, "edge-agent"), "spool");
    }

    /** Puts an encoded summary into the spool (created if missing); returns the new file. */
    public static File spoolPut(File spoolDir, byte[] summary) throws EdgeAgentException {
        if (spoolDir == null) {
            throw new IllegalArgumentException("spoolDir is null");
        }
        return new File(nativeSpoolPut(spoolDir.getPath(), summary));
    }

    /** The JSON view of an encoded summary, as {@code edge-agent show --json} prints it. */
    public static String summaryJson(byte[] summary) throws EdgeAgentException {
        return nativeSummaryJson(summary);
    }

    /**
     * Runs the uploader once with {@code edge-agent upload}'s arguments (e.g. "--spool", dir,
     * "--server", url, "--token-file", file, "--now", "--once"); returns its exit status
     * (0: everything sent). Blocks while it sends: call it from a background worker.
     */
    public static int upload(String... args) throws EdgeAgentException {
        return nativeUpload(args);
    }

    /** {@link #startSelf}'s windowSeconds for no windows: one summary per snapshot. */
    public static final int NO_WINDOW = -1;

    /**
     * Begins observing this app's own libc calls (every thread; the libraries loaded now and
     * later, through their GOT): file, network, wait calls, as the other backends count them.
     * Snapshot with {@link #snapshotSelf}, stop with {@link #stopSelf} (final: a later start
     * is refused).
     *
     * @param only comma-separated syscall names ("read,connect"), or null for all
     * @param windowSeconds window length, 1 to 86400 seconds, or {@link #NO_WINDOW}
     * @throws IllegalArgumentException unknown syscall names (named), a bad window
     * @throws IllegalStateException observing already, or stopped
     * @throws EdgeAgentException the process cannot be observed (nothing was installed)
     */
    public static void startSelf(String only, int windowSeconds) throws EdgeAgentException {
        nativeStartSelf(only, windowSeconds);
    }

    /**
     * The encoded summary (at most 2048 bytes) of what this app did since the last snapshot
     * (or the start), ready for {@link #spoolPut}.
     *
     * @throws IllegalStateException before {@link #startSelf}
     */
    public static byte[] snapshotSelf() throws EdgeAgentException {
        return nativeSnapshotSelf();
    }

    /**
     * Stops observing: the app's libc calls pass straight through (one indirect call and one
     * atomic load each remain). What was observed before can still be snapshot.
     *
     * @throws IllegalStateException before {@link #startSelf}
     */
    public static void stopSelf() throws EdgeAgentException {
        nativeStopSelf();
    }

    /**
     * Begins one run of an operation worth comparing across devices (a sync, a page load);
     * end it with {@link #runEnd}. Between the two, nothing is recorded unless a per-device
     * directive of the service (see {@link #fetchDirectives}) takes the run: then the whole
     * app's libc calls are observed in full until its end, as {@link #startSelf} does.
     *
     * @param name the operation's name, the program the service groups runs by (1 to 255 bytes)
     * @return the run's handle for {@link #runEnd}
     * @throws IllegalArgumentException an empty or too long name
     * @throws IllegalStateException 256 runs open already
     */
    public static long runBegin(String name) throws EdgeAgentException {
        return nativeRunBegin(name);
    }

    /**
     * Ends a run and returns its encoded summary (at most 2048 bytes) for {@link #spoolPut}:
     * a light record (duration, outcome, the app's CPU time and I/O bytes over the run), or,
     * for a run a directive took, the full summary with the fact directive=ID.
     *
     * @param run the handle {@link #runBegin} returned
     * @param status 0 if the operation succeeded, any other value if it failed
     * @throws IllegalArgumentException not an open run's handle
     */
    public static byte[] runEnd(long run, int status) throws EdgeAgentException {
        return nativeRunEnd(run, status);
    }

    /**
     * Takes this device's directives from a body of GET /v1/directives?device=ID the app
     * fetched itself; returns how many per-device directives are in force. A bad body is
     * refused whole (IllegalArgumentException) and the directives known stay.
     */
    public static int setDirectives(byte[] body) throws EdgeAgentException {
        return nativeSetDirectives(body);
    }

    /**
     * Fetches this device's directives from the service (the device id kept beside the
     * spool) and takes them; returns how many are in force. Blocks for the request: call it
     * from the periodic worker that uploads.
     *
     * @param tokenFile the upload token's file, or null
     * @param caFile a CA certificate file for a private service, or null
     */
    public static int fetchDirectives(File spoolDir, String server, File tokenFile, File caFile)
            throws EdgeAgentException {
        return nativeFetchDirectives(
                spoolDir.getPath(),
                server,
                tokenFile == null ? null : tokenFile.getPath(),
                caFile == null ? null : caFile.getPath());
    }

    private static native long nativeRunBegin(String name) throws EdgeAgentException;

    private static native byte[] nativeRunEnd(long run, int status) throws EdgeAgentException;

    private static native int nativeSetDirectives(byte[] body) throws EdgeAgentException;

    private static native int nativeFetchDirectives(
            String spoolDir, String server, String tokenFile, String caFile)
            throws EdgeAgentException;

    private static native void nativeStartSelf(String only, int windowSeconds)
            throws EdgeAgentException;

    private static native byte[] nativeSnapshotSelf() throws EdgeAgentException;

    private static native void nativeStopSelf() throws EdgeAgentException;

    private static native byte[] nativeTrace(String[] argv, String[] only, String[] facts)
            throws EdgeAgentException;

    private static native String nativeSpoolPut(String spoolDir, byte[] summary)
            throws EdgeAgentException;

    private static native String nativeSummaryJson(byte[] summary) throws EdgeAgentException;

    private static native int nativeUpload(String[] args) throws EdgeAgentException;

    private static native String nativeVersion();
}
