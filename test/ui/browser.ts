/**
 * A real headless Chromium (Debian's `/usr/bin/chromium`, driven by playwright-core) and a
 * Chronos API on a real port whose router is a real webhook receiver (the Sink), for the
 * dashboard's tests, its screenshots and its benchmark.
 *
 * The service's loops are not started: a test delivers what is due by calling
 * `service.dispatcher.runOnce()`, so nothing waits on a timer.
 */
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import type { ChronosApp } from '../../packages/chronos-timers-server/src/http/app.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { ChronosService, type ServiceOptions } from '../../packages/chronos-timers-server/src/service.js';
import { Sink } from '../support/sink.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const OPERATOR_TOKEN = 'operator-token-for-dashboard-tests-0123456789';
const WEBHOOK_SECRET = 'whsec_' + Buffer.from('dashboard-test-secret-0123456789').toString('base64');

export interface Chromium {
  browser: Browser;
  /** A fresh context (its own sessionStorage) for one test. */
  context(): Promise<BrowserContext>;
  close(): Promise<void>;
}

/**
 * Launches Chromium headless with nothing that reaches the network. playwright-core gives every
 * launch a fresh profile (a new temporary user-data-dir, removed on close).
 */
export async function launchChromium(): Promise<Chromium> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    browser,
    context: () => browser.newContext({ viewport: { width: 1280, height: 860 } }),
    close: () => browser.close(),
  };
}

export interface DashboardServer {
  /** E.g. `http://127.0.0.1:41234`. */
  url: string;
  app: ChronosApp;
  service: ChronosService;
  /** The router: every wake is POSTed here. */
  sink: Sink;
  close(): Promise<void>;
}

/** The API and the page on a free port of 127.0.0.1, over `store` (a test database or a PGlite). */
export async function startDashboardServer(
  store: Pick<ServiceOptions, 'db' | 'pglite'>,
  env: Record<string, string> = {},
): Promise<DashboardServer> {
  const sink = await Sink.start();
  const config = loadConfig({
    CHRONOS_OPERATOR_TOKEN: OPERATOR_TOKEN,
    CHRONOS_ROUTER_URL: sink.url(),
    CHRONOS_WEBHOOK_SECRET: WEBHOOK_SECRET,
    CHRONOS_CREATE_RATE: '0',
    CHRONOS_MAX_ACTIVE_ALARMS: '0',
    ...env,
  });
  const service = await ChronosService.open(config, { ...store, logger: silentLogger });
  const app = await createApp(service);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    app,
    service,
    sink,
    async close() {
      await app.close();
      await service.stop();
      await sink.close();
    },
  };
}
