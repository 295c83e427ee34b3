/**
 * What the library's loops record, as the shapes they call: the dispatcher (claims, deliveries,
 * lateness), the shared loop (its errors), retention and the migrations' repairs. The server's
 * Prometheus `Metrics` has these members; the library has no `/metrics` and records nothing, so
 * it needs no metrics client of its own.
 */
interface Count {
  inc(value?: number): void;
}
interface LabelledCount<L extends string> {
  inc(labels: Partial<Record<L, string | number>>, value?: number): void;
}
interface Observe {
  observe(value: number): void;
}
interface LabelledObserve<L extends string> {
  observe(labels: Partial<Record<L, string | number>>, value: number): void;
}

export interface LoopMetrics {
  deliveries: LabelledCount<'outcome'>;
  lateness: Observe;
  claims: Count;
  claimSeconds: Observe;
  attemptSeconds: LabelledObserve<'receiver'>;
  inFlight: { set(value: number): void };
  loopErrors: LabelledCount<'loop'>;
  wakesPruned: Count;
  storedRepairs: Count;
}
