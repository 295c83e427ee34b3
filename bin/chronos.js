#!/usr/bin/env node
// The `chronos` command. In a checkout (src/ present, tsx installed) it runs the compiled dist/
// when that build is of these very sources (its stamp, bin/source-stamp.js: `npm install` builds
// it, through the `prepare` script), and otherwise the TypeScript sources directly, in this same
// process — never a stale build, and signals reach the server itself. Compiled code starts in a
// fraction of the time tsx takes, and the build holds the embedded store's template. An installed
// package (no src/) runs the compiled dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildIsCurrent } from './source-stamp.js';

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const built = new URL('../dist/cli/main.js', import.meta.url);

async function loadTsx() {
  try {
    return await import('tsx/esm/api');
  } catch {
    return null;
  }
}

const root = fileURLToPath(new URL('..', import.meta.url));
const tsx = existsSync(source) && !buildIsCurrent(root) ? await loadTsx() : null;
if (tsx) {
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
