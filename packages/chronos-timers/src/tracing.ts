/**
 * OpenTelemetry, through `@opentelemetry/api` only: whoever registers a tracer provider (the
 * application using the library, or `chronos serve` when the `OTEL_*` variables ask for OTLP —
 * see `startTracing`) gets Chronos's spans; without one every call here is a no-op.
 *
 * One trace runs from the request that created an alarm to the webhook that delivers it: the
 * create span's W3C `traceparent` is stored with the alarm, the deliver span is its child, and the
 * webhook carries the deliver span's `traceparent` to the router. With no tracer provider the
 * incoming `traceparent` itself is stored and forwarded, so a caller's trace still reaches the
 * router. Spans: `chronos.create`, `chronos.claim`, `chronos.deliver`, `chronos.record`, and one
 * server span per HTTP request.
 *
 * Not here: metrics and logs through OpenTelemetry (Prometheus and pino serve those).
 */
import {
  context,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { PACKAGE_NAME, VERSION } from './version.js';

export { SpanKind, SpanStatusCode, type Span };

export const tracer = trace.getTracer(PACKAGE_NAME, VERSION);

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context a W3C `traceparent` names (a remote parent), or `base` when it names none. */
export function contextOf(traceparent: string | undefined, base: Context = ROOT_CONTEXT): Context {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!match || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return base;
  return trace.setSpanContext(base, {
    traceId: match[1]!,
    spanId: match[2]!,
    traceFlags: parseInt(match[3]!, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/** The W3C `traceparent` of a span (a non-recording one keeps its parent's), or '' for none. */
export function traceparentOf(span: Span | undefined): string {
  const sc = span?.spanContext();
  if (!sc || !trace.isSpanContextValid(sc)) return '';
  return `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags & TraceFlags.SAMPLED}`;
}

/** Starts a span under `parent` (the active context by default). */
export function startSpan(
  name: string,
  attributes: Attributes,
  parent?: Context,
  kind = SpanKind.INTERNAL,
): Span {
  return tracer.startSpan(name, { kind, attributes }, parent ?? context.active());
}

/** Runs `fn` in a span that ends with it, marked as an error when it throws. */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  parent?: Context,
): Promise<T> {
  const span = startSpan(name, attributes, parent);
  try {
    return await context.with(trace.setSpan(parent ?? context.active(), span), () => fn(span));
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    throw error;
  } finally {
    span.end();
  }
}

/**
 * True when a tracer provider is registered, so per-fire spans are worth their cost; without
 * one they would only allocate no-op spans.
 */
export function tracingOn(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer(PACKAGE_NAME) !== undefined;
}

/**
 * True when the standard `OTEL_*` variables ask for traces to be exported over OTLP: an OTLP
 * endpoint is set or `OTEL_TRACES_EXPORTER` names `otlp`; never with `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none`.
 */
export function traceExportWanted(env: Record<string, string | undefined>): boolean {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.toLowerCase();
  if (exporter !== undefined && exporter !== '') return exporter.split(',').includes('otlp');
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}
