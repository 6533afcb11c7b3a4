package dev.edgeagent;

import java.io.File;
import java.io.FileInputStream;
import java.nio.file.Files;
import java.util.Arrays;

/**
 * What observing itself costs a JVM (scripts/bench-self): a file of 64 MiB
 * read with FileInputStream.read(byte[4096]) (16385 calls), timed unobserved,
 * observed (startSelf), and after stopSelf, each the median of REPS loops.
 * The three phases run in that order (a stop is final for the process);
 * the script runs the whole program several times.
 */
public final class SelfBench {
    private static final int REPS = 15;

    private static long readAll(File file) throws Exception {
        byte[] buf = new byte[4096];
        long start = System.nanoTime();
        try (FileInputStream in = new FileInputStream(file)) {
            while (in.read(buf) >= 0) {
                // only the reads are timed
            }
        }
        return System.nanoTime() - start;
    }

    private static long medianOf(File file) throws Exception {
        long[] times = new long[REPS];
        for (int i = 0; i < REPS; i++) {
            times[i] = readAll(file);
        }
        Arrays.sort(times);
        return times[REPS / 2];
    }

    public static void main(String[] args) throws Exception {
        EdgeAgent.load(new File(args[0]));
        File file = new File(args[1]);
        Files.write(file.toPath(), new byte[64 << 20]);
        for (int i = 0; i < 5; i++) {
            readAll(file); // JIT and page cache warm
        }
        long unobserved = medianOf(file);
        EdgeAgent.startSelf("read", EdgeAgent.NO_WINDOW);
        long observed = medianOf(file);
        byte[] summary = EdgeAgent.snapshotSelf();
        EdgeAgent.stopSelf();
        long stopped = medianOf(file);
        System.out.printf(
                "unobserved %.2f ms  observed %.2f ms (%.3f x)  after stopSelf %.2f ms (%.3f x)  summary %d bytes%n",
                unobserved / 1e6, observed / 1e6, (double) observed / unobserved,
                stopped / 1e6, (double) stopped / unobserved, summary.length);
    }
}
