package androidx.work;

import android.content.Context;

public abstract class WorkManager {
    public static WorkManager getInstance(Context context) { return null; }
    public abstract Object enqueueUniquePeriodicWork(
            String name, ExistingPeriodicWorkPolicy policy, PeriodicWorkRequest request);
}
