package androidx.work;

import java.util.concurrent.TimeUnit;

public abstract class WorkRequest {
    public abstract static class Builder<B extends Builder<?, ?>, W extends WorkRequest> {
        @SuppressWarnings("unchecked")
        public final B setConstraints(Constraints constraints) { return (B) this; }
        @SuppressWarnings("unchecked")
        public final B setInputData(Data data) { return (B) this; }
        @SuppressWarnings("unchecked")
        public final B setBackoffCriteria(BackoffPolicy policy, long delay, TimeUnit unit) { return (B) this; }
        public abstract W build();
    }
}
