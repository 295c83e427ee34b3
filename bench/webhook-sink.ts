/**
 * The router stand-in for the webhook benchmarks, run as its own process (so its work does not
 * share the dispatcher's event loop): the test suite's Sink answering 200 at once, counting
 * requests and, when asked, keeping `[scheduled_for, received at]` of each for lateness.
 *
 * Driven over IPC by `startSinkProcess()` in webhook-support.ts:
 *   child → parent  { type: 'ready', port }
 *   parent → child  { type: 'reset' } | { type: 'report' }
 *   child → parent  { type: 'report', received, connections, samples, cpuMs }
 */
import { Sink } from '../test/support/sink.js';

const keepSamples = process.argv.includes('--samples');
let samples: [number, number][] = [];
let cpuAtReset = process.cpuUsage();

const sink = await Sink.start({
  record: false,
  respond: (request) => {
    if (keepSamples) {
      const { scheduled_for } = JSON.parse(request.body) as { scheduled_for: string };
      samples.push([Date.parse(scheduled_for), request.receivedAt]);
    }
    return { status: 200 };
  },
});

process.on('message', (message: { type: string }) => {
  if (message.type === 'reset') {
    sink.received = 0;
    sink.connections = 0;
    samples = [];
    cpuAtReset = process.cpuUsage();
    process.send!({ type: 'reset' });
  } else if (message.type === 'report') {
    const cpu = process.cpuUsage(cpuAtReset);
    process.send!({
      type: 'report',
      received: sink.received,
      connections: sink.connections,
      samples,
      cpuMs: (cpu.user + cpu.system) / 1000,
    });
  } else if (message.type === 'stop') {
    void sink.close().then(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ type: 'ready', port: sink.port });
