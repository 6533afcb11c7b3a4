package androidx.work;

public final class WorkerParameters {}
