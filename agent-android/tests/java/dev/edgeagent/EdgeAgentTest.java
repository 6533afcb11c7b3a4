package dev.edgeagent;

import java.io.File;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Drives the real libagent_android (host build) through the Java wrapper:
 * traces commands, reads the summaries back, spools them, and checks that bad
 * arguments raise exceptions instead of crashing the JVM.
 *
 * <p>Run by agent-android/tests/java_jni.rs: {@code java -cp CLASSES
 * dev.edgeagent.EdgeAgentTest LIBRARY TMPDIR}. Prints one line per test and
 * "N passed, N failed"; exits 1 if any failed.
 */
public final class EdgeAgentTest {
    private static int passed;
    private static int failed;

    private interface Body {
        void run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        EdgeAgent.load(new File(args[0]));
        File tmp = new File(args[1]);

        test("version", () -> check(!EdgeAgent.version().isEmpty(), "empty version"));

        test("exit status is recorded", () -> {
            byte[] summary = EdgeAgent.trace(new String[] {"sh", "-c", "exit 3"}, null, null);
            check(summary.length > 0 && summary.length <= 2048, "summary length " + summary.length);
            Map<String, Object> run = obj(json(summary).get("run"));
            check(num(obj(run.get("exit")).get("code")) == 3, "exit " + run.get("exit"));
        });

        test("dd's reads are counted", () -> {
            // Startup reads (the dynamic loader's) are the same in both runs,
            // so the difference is dd's own 64-byte reads.
            long few = reads(EdgeAgent.trace(dd(17), null, null));
            long many = reads(EdgeAgent.trace(dd(40), null, null));
            check(many - few == 23, "reads: count=17 gave " + few + ", count=40 gave " + many);
        });

        test("facts and the syscall filter are applied", () -> {
            Map<String, String> facts = new LinkedHashMap<>();
            facts.put("net", "wifi");
            facts.put("app.version", "1.2.3");
            Map<String, Object> s = json(EdgeAgent.trace(dd(5), new String[] {"read"}, facts));
            Map<String, Object> extra = obj(obj(s.get("facts")).get("extra"));
            check("wifi".equals(extra.get("net")) && "1.2.3".equals(extra.get("app.version")),
                    "facts " + extra);
            for (Object entry : list(s.get("syscalls"))) {
                Object name = obj(entry).get("name");
                check("read".equals(name) || "other".equals(name), "filtered out " + name);
            }
            check(reads(s) >= 5, "reads " + reads(s));
        });

        test("summaries go into the spool", () -> {
            byte[] summary = EdgeAgent.trace(new String[] {"true"}, null, null);
            File spool = EdgeAgent.spoolDir(new File(tmp, "files"));
            File file = EdgeAgent.spoolPut(spool, summary);
            check(file.isFile() && file.getParentFile().equals(spool), "spooled to " + file);
            byte[] stored = Files.readAllBytes(file.toPath());
            check(obj(json(stored)).get("id").equals(json(summary).get("id")), "id changed");
        });

        test("null or empty command", () -> {
            expect(IllegalArgumentException.class, () -> EdgeAgent.trace(null, null, null));
            expect(IllegalArgumentException.class, () -> EdgeAgent.trace(new String[0], null, null));
            expect(IllegalArgumentException.class, () -> EdgeAgent.trace(new String[] {null}, null, null));
            expect(IllegalArgumentException.class, () -> EdgeAgent.trace(new String[] {""}, null, null));
        });

        test("bad facts and unknown syscalls", () -> {
            expect(IllegalArgumentException.class,
                    () -> EdgeAgent.trace(new String[] {"true"}, null, Map.of("bad key", "v")));
            expect(IllegalArgumentException.class,
                    () -> EdgeAgent.trace(new String[] {"true"}, null, Map.of("k", "line\nbreak")));
            expect(IllegalArgumentException.class,
                    () -> EdgeAgent.trace(new String[] {"true"}, new String[] {"no_such_call"}, null));
            expect(IllegalArgumentException.class,
                    () -> EdgeAgent.trace(new String[] {"true"}, new String[] {null}, null));
        });

        test("a missing program is an EdgeAgentException naming it", () -> {
            EdgeAgentException e = expect(EdgeAgentException.class,
                    () -> EdgeAgent.trace(new String[] {"/nonexistent/edge-agent-test"}, null, null));
            check(e.getMessage().contains("/nonexistent/edge-agent-test"), e.getMessage());
        });

        test("garbage is not a summary", () -> {
            expect(EdgeAgentException.class, () -> EdgeAgent.summaryJson(new byte[] {1, 2, 3}));
            expect(EdgeAgentException.class, () -> EdgeAgent.summaryJson(new byte[0]));
            expect(IllegalArgumentException.class, () -> EdgeAgent.summaryJson(null));
            File spool = new File(tmp, "garbage-spool");
            expect(EdgeAgentException.class, () -> EdgeAgent.spoolPut(spool, new byte[] {9, 9}));
        });

        test("an unusable spool is an EdgeAgentException", () -> {
            byte[] summary = EdgeAgent.trace(new String[] {"true"}, null, null);
            File notADir = new File(tmp, "plain-file");
            Files.write(notADir.toPath(), new byte[] {1});
            EdgeAgentException e = expect(EdgeAgentException.class,
                    () -> EdgeAgent.spoolPut(new File(notADir, "spool"), summary));
            check(e.getMessage().contains("plain-file"), e.getMessage());
        });

        test("bad uploader arguments", () -> {
            expect(IllegalArgumentException.class, () -> EdgeAgent.upload("--no-such-flag"));
            expect(IllegalArgumentException.class, () -> EdgeAgent.upload((String[]) null));
        });

        // Last: a directed run patches this JVM's GOT entries for good.
        test("an app's runs: light, or directed by the service", () -> {
            expect(IllegalArgumentException.class, () -> EdgeAgent.runBegin(""));
            expect(IllegalArgumentException.class, () -> EdgeAgent.runBegin(null));
            expect(IllegalArgumentException.class, () -> EdgeAgent.runEnd(987654321L, 0));
            expect(IllegalArgumentException.class,
                    () -> EdgeAgent.setDirectives("{\"device_directives\": 3}".getBytes("UTF-8")));
            expect(IllegalArgumentException.class,
                    () -> EdgeAgent.fetchDirectives(tmp, "ftp://example.net", null, null));
            File data = new File(tmp, "run-data");
            Files.write(data.toPath(), new byte[9 * 4096]);
            long light = EdgeAgent.runBegin("jsync");
            // The same code path once before the directed run: class loading
            // reads nothing then.
            readAll(data);
            Map<String, Object> l = json(EdgeAgent.runEnd(light, 2));
            check("light".equals(l.get("kind")), "kind " + l.get("kind"));
            check("jsync".equals(obj(l.get("facts")).get("program")), "program");
            check(num(obj(obj(l.get("run")).get("exit")).get("code")) == 2, "exit");
            long until = (System.currentTimeMillis() + 3_600_000L) * 1_000_000L;
            String body = "{\"device_directives\": [{\"id\": \"j1\", \"program\": \"jsync\","
                    + " \"runs\": 1, \"expires_unix_ns\": " + until + "}]}";
            check(EdgeAgent.setDirectives(body.getBytes("UTF-8")) == 1, "one directive");
            long directed = EdgeAgent.runBegin("jsync");
            readAll(data);
            Map<String, Object> d = json(EdgeAgent.runEnd(directed, 0));
            check("full".equals(d.get("kind")), "directed kind " + d.get("kind"));
            check("j1".equals(obj(obj(d.get("facts")).get("extra")).get("directive")), "fact");
            check(reads(d) == 10, "directed run's reads on file: " + reads(d));
            long after = EdgeAgent.runBegin("jsync");
            check("light".equals(json(EdgeAgent.runEnd(after, 0)).get("kind")), "spent");
        });

        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    private static void readAll(File file) throws java.io.IOException {
        try (java.io.FileInputStream in = new java.io.FileInputStream(file)) {
            byte[] buf = new byte[4096];
            while (in.read(buf) > 0) {
                // to the end: 9 full reads and the one that finds it
            }
        }
    }

    private static String[] dd(int count) {
        return new String[] {"dd", "if=/dev/zero", "of=/dev/null", "bs=64", "count=" + count};
    }

    private static long reads(byte[] summary) throws EdgeAgentException {
        return reads(json(summary));
    }

    /** Calls of read on files (dd's /dev/zero is a character device: kind "file"). */
    private static long reads(Map<String, Object> summary) {
        long n = 0;
        for (Object entry : list(summary.get("syscalls"))) {
            Map<String, Object> s = obj(entry);
            if ("read".equals(s.get("name")) && "file".equals(s.get("fd_kind"))) {
                n += num(s.get("count"));
            }
        }
        return n;
    }

    private static void test(String name, Body body) {
        try {
            body.run();
            passed++;
            System.out.println("ok   " + name);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + name + ": " + t);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static <T extends Throwable> T expect(Class<T> type, Body body) {
        try {
            body.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                check(t.getMessage() != null && !t.getMessage().isEmpty(), "exception without a message");
                return type.cast(t);
            }
            throw new AssertionError("expected " + type.getSimpleName() + ", got " + t, t);
        }
        throw new AssertionError("expected " + type.getSimpleName() + ", nothing was thrown");
    }

    private static Map<String, Object> json(byte[] summary) throws EdgeAgentException {
        return obj(new Json(EdgeAgent.summaryJson(summary)).value());
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> obj(Object o) {
        check(o instanceof Map, "not an object: " + o);
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        check(o instanceof List, "not an array: " + o);
        return (List<Object>) o;
    }

    private static long num(Object o) {
        check(o instanceof Double, "not a number: " + o);
        return Math.round((Double) o);
    }

    /** Just enough JSON for the summary view (the JDK has no parser). */
    private static final class Json {
        private final String text;
        private int at;

        Json(String text) {
            this.text = text;
        }

        Object value() {
            skip();
            char c = text.charAt(at);
            switch (c) {
                case '{': {
                    Map<String, Object> map = new LinkedHashMap<>();
                    at++;
                    skip();
                    if (text.charAt(at) == '}') {
                        at++;
                        return map;
                    }
                    while (true) {
                        skip();
                        String key = string();
                        skip();
                        expectChar(':');
                        map.put(key, value());
                        skip();
                        if (text.charAt(at++) == '}') {
                            return map;
                        }
                    }
                }
                case '[': {
                    List<Object> items = new ArrayList<>();
                    at++;
                    skip();
                    if (text.charAt(at) == ']') {
                        at++;
                        return items;
                    }
                    while (true) {
                        items.add(value());
                        skip();
                        if (text.charAt(at++) == ']') {
                            return items;
                        }
                    }
                }
                case '"':
                    return string();
                default:
                    int start = at;
                    while (at < text.length() && ",}] \n".indexOf(text.charAt(at)) < 0) {
                        at++;
                    }
                    String word = text.substring(start, at);
                    if (word.equals("null")) {
                        return null;
                    }
                    if (word.equals("true") || word.equals("false")) {
                        return Boolean.valueOf(word);
                    }
                    return Double.valueOf(word);
            }
        }

        private String string() {
            expectChar('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = text.charAt(at++);
                if (c == '"') {
                    return out.toString();
                }
                if (c == '\\') {
                    char e = text.charAt(at++);
                    switch (e) {
                        case 'n': out.append('\n'); break;
                        case 't': out.append('\t'); break;
                        case 'r': out.append('\r'); break;
                        case 'b': out.append('\b'); break;
                        case 'f': out.append('\f'); break;
                        case 'u':
                            out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                            at += 4;
                            break;
                        default: out.append(e);
                    }
                } else {
                    out.append(c);
                }
            }
        }

        private void expectChar(char c) {
            if (text.charAt(at) != c) {
                throw new IllegalStateException("JSON: expected " + c + " at " + at);
            }
            at++;
        }

        private void skip() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }
    }
}
