/**
 * What `chronos serve` exports traces through when the standard `OTEL_*`
 * variables ask for it: a tracer provider with a batching OTLP/HTTP exporter, registered for
 * `@opentelemetry/api` (with the async-hooks context manager and the W3C propagator). The
 * exporter reads its endpoint, headers and timeout from the variables itself
 * (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `…_HEADERS`);
 * `OTEL_SERVICE_NAME` names the service (default `chronos`), `OTEL_RESOURCE_ATTRIBUTES` adds to it.
 *
 * On when an OTLP endpoint is set or `OTEL_TRACES_EXPORTER=otlp`; off with `OTEL_SDK_DISABLED=true`
 * or `OTEL_TRACES_EXPORTER=none`. The library never starts one: an application registers its own
 * provider, and Chronos's spans join it. Loaded only when on (it is imported dynamically).
 */
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { VERSION } from 'chronos-timers/internal';

export interface TraceExport {
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}

export function startTraceExport(env: Record<string, string | undefined>): TraceExport {
  const resource = resourceFromAttributes({
    'service.name': env.OTEL_SERVICE_NAME || 'chronos',
    'service.version': VERSION,
  }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  return { shutdown: () => provider.shutdown() };
}
