package androidx.work;

import android.content.Context;

public abstract class ListenableWorker {
    public ListenableWorker(Context context, WorkerParameters params) {}

    public final Data getInputData() { return new Data(); }

    public abstract static class Result {
        public static Result success() { return null; }
        public static Result retry() { return null; }
        public static Result failure() { return null; }
    }
}
