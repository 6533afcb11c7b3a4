package android.content;

public abstract class Context {
    public abstract java.io.File getNoBackupFilesDir();
}
