/**
 * `/ui`: the dashboard (contract §15) — one HTML page, one stylesheet and one ES module from the
 * package's own `ui/` folder, read once when the app is built. No credentials are needed to load
 * the page; everything it shows comes from `/v1` with the key the viewer signs in with.
 *
 * Every answer carries a strict Content-Security-Policy: scripts, styles and requests from this
 * origin only, no inline script or style, no frames, no forms posted anywhere. The page works
 * offline: nothing is fetched from another host.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `ui/` is from this file, in `src/http/routes/` (tsx, tests) and `dist/http/routes/` alike. */
const UI_DIR = new URL('../../../ui/', import.meta.url);

export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const FILES = {
  '/ui': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/ui/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
  '/ui/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
} as const;

export function registerDashboardRoutes(app: FastifyInstance): void {
  for (const [url, { file, type }] of Object.entries(FILES)) {
    const body = readFileSync(new URL(file, UI_DIR));
    app.get(url, async (_request, reply) => secured(reply).type(type).send(body));
  }
  app.get('/ui/', async (_request, reply) => reply.redirect('/ui', 301));
  // A browser opening the server's address finds the dashboard; an API client keeps its 404.
  app.get('/', async (request, reply) => {
    if (/\btext\/html\b/.test(request.headers.accept ?? '')) return reply.redirect('/ui', 302);
    return reply.callNotFound();
  });
}

function secured(reply: FastifyReply): FastifyReply {
  return reply.headers({
    'content-security-policy': DASHBOARD_CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-cache',
  });
}
