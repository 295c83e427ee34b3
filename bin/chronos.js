#!/usr/bin/env node
// The `chronos` command. In a checkout (src/ present, tsx installed) it runs the TypeScript
// sources directly, in this same process, so it never runs a stale build and signals reach the
// server itself; an installed package (no src/) runs the compiled dist/.
import { existsSync } from 'node:fs';
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

const tsx = existsSync(source) ? await loadTsx() : null;
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
