#!/usr/bin/env node
// The `chronos` command. In a checkout (src/ present, tsx installed) it runs the compiled dist/ of
// both packages when those builds are of these very sources (their stamps, scripts/source-stamp.mjs:
// `npm install` builds them, through the `prepare` script), and otherwise the TypeScript sources
// directly, in this same process — never a stale build, and signals reach the server itself. From
// the sources, `chronos-timers` and `chronos-timers/internal` resolve to the library's sources
// (bin/source-resolve.js), as the tests and the type check see them. An installed package (no
// src/) runs the compiled dist/.
import { existsSync } from 'node:fs';
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const built = new URL('../dist/cli/main.js', import.meta.url);

async function loadTsx() {
  try {
    return await import('tsx/esm/api');
  } catch {
    return null;
  }
}

/** True when this checkout's builds of both packages are current (a checkout only). */
async function buildsAreCurrent() {
  const stamps = new URL('../../../scripts/source-stamp.mjs', import.meta.url);
  if (!existsSync(fileURLToPath(stamps))) return existsSync(fileURLToPath(built));
  const { buildIsCurrent } = await import(stamps.href);
  const server = fileURLToPath(new URL('..', import.meta.url));
  const library = fileURLToPath(new URL('../../chronos-timers/', import.meta.url));
  return buildIsCurrent(library) && buildIsCurrent(server);
}

const tsx = existsSync(source) && !(await buildsAreCurrent()) ? await loadTsx() : null;
if (tsx) {
  register('./source-resolve.js', import.meta.url);
  tsx.register();
  await import('../src/cli/main.ts');
} else if (existsSync(fileURLToPath(built))) {
  await import(built.href);
} else {
  process.stderr.write(
    'chronos: neither the sources with tsx nor a build (dist/) were found; run `npm install`, or `npm run build`\n',
  );
  process.exitCode = 1;
}
