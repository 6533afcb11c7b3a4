package androidx.work;

public final class Data {
    public String[] getStringArray(String key) { return null; }

    public static final class Builder {
        public Builder putStringArray(String key, String[] value) { return this; }
        public Data build() { return new Data(); }
    }
}
