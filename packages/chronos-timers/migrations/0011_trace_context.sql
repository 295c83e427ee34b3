-- Tracing (contract §14, OpenTelemetry): the W3C traceparent of the request that created an
-- alarm (its create span), so the span that delivers it — and the webhook, which carries it to
-- the router — continue that trace. '' when the creator had no trace.
ALTER TABLE alarms ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
