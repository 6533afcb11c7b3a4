package dev.edgeagent;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

/**
 * A JVM observes itself through the Java wrapper: startSelf, a file read with
 * FileInputStream.read(byte[4096]), a body fetched over a java.net.Socket from the
 * test's loopback HTTP server, snapshotSelf. Every code path runs once before the
 * start (class loading reads jar files through the same libc read), so what the
 * summary counts on files is this code's reads.
 *
 * <p>Run by agent-android/tests/java_jni.rs: {@code java -cp CLASSES
 * dev.edgeagent.SelfObserveTest LIBRARY TMPDIR PORT BODY_LENGTH}. Writes the
 * snapshots to TMPDIR/self-1 and TMPDIR/self-2, prints "reads=N" (the read
 * calls the file loop made), "socket_reads=N" (the observed fetch's) and "self: ok" when every check passed.
 */
public final class SelfObserveTest {
    static final int SIZE = 64 * 4096;

    /** The InputStream.read calls the last fetch on this thread made. */
    static final ThreadLocal<Long> SOCKET_READS = ThreadLocal.withInitial(() -> 0L);

    private interface Body {
        void run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        EdgeAgent.load(new File(args[0]));
        File tmp = new File(args[1]);
        int port = Integer.parseInt(args[2]);
        int bodyLength = Integer.parseInt(args[3]);
        File data = new File(tmp, "data");
        Files.write(data.toPath(), new byte[SIZE]);

        // Every path once, unobserved: the classes they need are loaded now.
        readAll(data);
        check(fetch(port) == bodyLength, "warm-up fetch");
        message(expect(IllegalStateException.class, EdgeAgent::snapshotSelf));
        expect(IllegalStateException.class, EdgeAgent::stopSelf);
        String unknown = message(expect(IllegalArgumentException.class,
                () -> EdgeAgent.startSelf("read,no_such_call", EdgeAgent.NO_WINDOW)));
        check(unknown.contains("no_such_call"), "unknown name not named: " + unknown);
        expect(IllegalArgumentException.class, () -> EdgeAgent.startSelf(null, 0));

        EdgeAgent.startSelf(null, EdgeAgent.NO_WINDOW);
        long reads = readAll(data);
        int fetched = fetch(port);
        byte[] first = EdgeAgent.snapshotSelf();
        long socketReads = SOCKET_READS.get();

        check(fetched == bodyLength, "fetched " + fetched + " of " + bodyLength);
        String again = message(expect(IllegalStateException.class,
                () -> EdgeAgent.startSelf(null, EdgeAgent.NO_WINDOW)));
        check(again.contains("already observing this process"), "second start: " + again);

        // The JVM's threads and ours keep working while observed.
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                try {
                    readAll(data);
                    fetch(port);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        System.gc();
        byte[] second = EdgeAgent.snapshotSelf();
        EdgeAgent.stopSelf();
        readAll(data);

        Files.write(new File(tmp, "self-1").toPath(), first);
        Files.write(new File(tmp, "self-2").toPath(), second);
        System.out.println("reads=" + reads);
        System.out.println("socket_reads=" + socketReads);
        System.out.println("self: ok");
    }

    /** Reads the file to its end; returns the read calls made (the last finds the end). */
    static long readAll(File file) throws Exception {
        long calls = 0;
        byte[] buf = new byte[4096];
        try (FileInputStream in = new FileInputStream(file)) {
            while (true) {
                calls++;
                if (in.read(buf) < 0) {
                    return calls;
                }
            }
        }
    }

    /** GET / from the loopback server; returns the body's length. */
    static int fetch(int port) throws Exception {
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
            OutputStream out = socket.getOutputStream();
            out.write("GET / HTTP/1.0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            byte[] buf = new byte[4096];
            StringBuilder response = new StringBuilder();
            long calls = 0;
            while (true) {
                calls++;
                int n = in.read(buf);
                if (n < 0) {
                    break;
                }
                response.append(new String(buf, 0, n, StandardCharsets.ISO_8859_1));
            }
            SOCKET_READS.set(calls);
            String text = response.toString();
            int end = text.indexOf("\r\n\r\n");
            return end < 0 ? -1 : text.length() - end - 4;
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static String message(Throwable t) {
        check(t.getMessage() != null && !t.getMessage().isEmpty(), "exception without a message");
        return t.getMessage();
    }

    static <T extends Throwable> T expect(Class<T> type, Body body) {
        try {
            body.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
            throw new AssertionError("expected " + type.getSimpleName() + ", got " + t, t);
        }
        throw new AssertionError("expected " + type.getSimpleName() + ", nothing was thrown");
    }
}
