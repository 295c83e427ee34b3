// What a build of a checkout was made from: one SHA-256 over every file the compiled code and the
// embedded template come from (src/, migrations/, package.json, the compiler's settings), each
// under its path. `npm run build` writes it to dist/source-stamp.json last; `chronos` in a
// checkout runs dist/ only when the stamp there is this checkout's own (the server's bin/chronos.js, for both packages), so an
// edit to any source after a build makes it run the sources again, never a stale build.
// Hashing ~1 MB of sources costs a few milliseconds; an installed package (no src/) never does.
import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import process from 'node:process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const TREES = ['src', 'migrations'];
const FILES = ['package.json', 'tsconfig.build.json', '../../tsconfig.json'];

/** The stamp file of a build of `root`. */
export function stampFile(root) {
  return join(root, 'dist', 'source-stamp.json');
}

/** The hash of the sources of the checkout at `root`. */
export function sourceStamp(root) {
  const paths = [...FILES.map((f) => join(root, f))];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) paths.push(path);
    }
  };
  // A package without migrations/ (the server's) has that tree empty.
  for (const tree of TREES) if (existsSync(join(root, tree))) walk(join(root, tree));
  const hash = createHash('sha256');
  for (const path of paths.map((p) => relative(root, p)).sort()) {
    let body;
    try {
      body = readFileSync(join(root, path));
    } catch {
      body = Buffer.alloc(0);
    }
    hash.update(`${path}\0${body.length}\0`).update(body);
  }
  return hash.digest('hex');
}

/** True when dist/ at `root` was built from these very sources. */
export function buildIsCurrent(root) {
  try {
    const stamp = JSON.parse(readFileSync(stampFile(root), 'utf8'));
    return stamp.sources === sourceStamp(root);
  } catch {
    return false;
  }
}

// `node scripts/source-stamp.mjs --write <package folder>`: the last step of each package's `npm run build`.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && process.argv[2] === '--write') {
  const root = process.argv[3] ?? process.cwd();
  writeFileSync(stampFile(root), `${JSON.stringify({ sources: sourceStamp(root) })}\n`);
}
