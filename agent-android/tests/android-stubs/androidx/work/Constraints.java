package androidx.work;

public final class Constraints {
    public static final class Builder {
        public Builder setRequiredNetworkType(NetworkType type) { return this; }
        public Builder setRequiresCharging(boolean charging) { return this; }
        public Builder setRequiresDeviceIdle(boolean idle) { return this; }
        public Constraints build() { return new Constraints(); }
    }
}
