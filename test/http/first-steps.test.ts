/**
 * What a newcomer meets first on the HTTP side (issue 46): the server's own address sends a
 * browser to the dashboard, and the OpenAPI document carries the package's version.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { describeEachBackend } from '../support/backends.js';
import { call, isProblem, openTestApp, type TestApp } from './support.js';

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

describeEachBackend('HTTP: first steps', ({ t }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  it('GET / sends a browser to /ui, and keeps the 404 problem for an API client', async () => {
    const browser = await call(h.app, 'GET', '/', {
      headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
    });
    expect(browser.status).toBe(302);
    expect(browser.headers.location).toBe('/ui');

    const client = await call(h.app, 'GET', '/', { headers: { accept: 'application/json' } });
    expect(isProblem(client, 404)).toBe(true);
    expect(client.body.detail).toContain('/openapi.json');
  });

  it("/openapi.json's info.version is the package's version", async () => {
    const r = await call(h.app, 'GET', '/openapi.json');
    expect(r.body.info.version).toBe(PACKAGE_VERSION);
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describeEachBackend('HTTP: a key from another store', ({ t, kind }) => {
  let h: TestApp;
  beforeEach(async () => {
    h = await openTestApp(t.db);
  });
  afterEach(async () => {
    await h.close();
  });

  it('an unknown key is told that keys belong to one store, and which store this server uses (no address)', async () => {
    const r = await call(h.app, 'GET', '/v1/alarms', {
      headers: { authorization: `Bearer chronos_${'A'.repeat(43)}` },
    });
    expect(isProblem(r, 401)).toBe(true);
    expect(r.body.detail).toContain('the API key is unknown or revoked');
    expect(r.body.detail).toContain('keys belong to the store they were created in, and this server uses ');
    expect(r.body.detail).toMatch(
      kind === 'pglite' || !h.service.config.databaseUrl ? /embedded store|PostgreSQL/ : /PostgreSQL/,
    );
    expect(r.body.detail).not.toMatch(/127\.0\.0\.1|localhost|\.chronos/);
  });
});
