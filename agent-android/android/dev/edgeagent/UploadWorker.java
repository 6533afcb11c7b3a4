package dev.edgeagent;

import android.content.Context;
import androidx.annotation.NonNull;
import androidx.work.BackoffPolicy;
import androidx.work.Constraints;
import androidx.work.Data;
import androidx.work.ExistingPeriodicWorkPolicy;
import androidx.work.NetworkType;
import androidx.work.PeriodicWorkRequest;
import androidx.work.WorkManager;
import androidx.work.Worker;
import androidx.work.WorkerParameters;
import java.io.File;
import java.util.concurrent.TimeUnit;

/**
 * Sends the app's spool with WorkManager, when the constraints the app chose
 * hold (unmetered network, charging, device idle). Needs
 * {@code androidx.work:work-runtime}; this file is Android-only (it is not
 * compiled by the host build).
 *
 * <p>The uploader itself keeps every summary until the service acknowledged
 * it, so a run cut short by WorkManager (constraints lost) loses nothing: the
 * next run sends the rest. Exit status 0 means everything was sent; anything
 * else asks WorkManager to retry later.
 */
public final class UploadWorker extends Worker {
    /** Input key: the uploader's arguments. */
    public static final String KEY_ARGS = "dev.edgeagent.upload.args";
    /** The unique name of the periodic work. */
    public static final String WORK_NAME = "edge-agent-upload";

    public UploadWorker(@NonNull Context context, @NonNull WorkerParameters params) {
        super(context, params);
    }

    @NonNull
    @Override
    public Result doWork() {
        String[] args = getInputData().getStringArray(KEY_ARGS);
        if (args == null) {
            return Result.failure();
        }
        try {
            EdgeAgent.loadLibrary();
            return EdgeAgent.upload(args) == 0 ? Result.success() : Result.retry();
        } catch (IllegalArgumentException e) {
            // Wrong arguments will not get better by retrying.
            return Result.failure();
        } catch (EdgeAgentException e) {
            return Result.retry();
        }
    }

    /**
     * Schedules the upload every {@code everyHours} hours under the given
     * constraints; keeps an already scheduled one.
     *
     * @param server the service's base URL (https://...)
     * @param tokenFile app-private file holding the group's bearer token
     * @param unmetered only on an unmetered network (Wi-Fi)
     * @param charging only while charging
     * @param idle only while the device is idle (no backoff: WorkManager refuses
     *     backoff criteria on idle-mode work)
     */
    public static void schedule(Context context, String server, File tokenFile, long everyHours,
            boolean unmetered, boolean charging, boolean idle) {
        Constraints constraints = new Constraints.Builder()
                .setRequiredNetworkType(unmetered ? NetworkType.UNMETERED : NetworkType.CONNECTED)
                .setRequiresCharging(charging)
                .setRequiresDeviceIdle(idle)
                .build();
        String spool = EdgeAgent.spoolDir(context.getNoBackupFilesDir()).getPath();
        Data input = new Data.Builder()
                .putStringArray(KEY_ARGS, new String[] {
                    "--spool", spool, "--server", server, "--token-file", tokenFile.getPath(),
                    "--now", "--once"})
                .build();
        PeriodicWorkRequest.Builder builder =
                new PeriodicWorkRequest.Builder(UploadWorker.class, everyHours, TimeUnit.HOURS)
                        .setConstraints(constraints)
                        .setInputData(input);
        if (!idle) {
            builder.setBackoffCriteria(BackoffPolicy.EXPONENTIAL, 30, TimeUnit.MINUTES);
        }
        WorkManager.getInstance(context)
                .enqueueUniquePeriodicWork(WORK_NAME, ExistingPeriodicWorkPolicy.KEEP, builder.build());
    }
}
