// The size check (issue 47, contract §9): packs both packages, installs the library alone into an
// empty application and then the server beside it, prints what each adds to node_modules, and
// fails when the library adds more than LIBRARY_LIMIT_MB (the contract's 20 MB) or the server
// more than SERVER_LIMIT_MB. `npm run sizes`; `npm test` runs it.
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import process from 'node:process';
import { join } from 'node:path';

const LIBRARY_LIMIT_MB = 20;
const SERVER_LIMIT_MB = 150;
const npm = (args, cwd) =>
  execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26 });

/** Bytes on disk of a folder's files (symlinks not followed). */
function bytes(path) {
  const s = lstatSync(path);
  if (!s.isDirectory()) return s.isFile() ? s.size : 0;
  let total = 0;
  for (const entry of readdirSync(path)) total += bytes(join(path, entry));
  return total;
}

const root = process.cwd();
const dir = mkdtempSync(join(tmpdir(), 'chronos-sizes-'));
try {
  const packed = JSON.parse(npm(['pack', '--workspaces', '--json', '--pack-destination', dir], root));
  const tarball = (name) => join(dir, packed.find((p) => p.name === name).filename);
  const app = join(dir, 'app');
  mkdirSync(app);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'empty-app', private: true, type: 'module' }),
  );
  const install = (...tarballs) =>
    npm(['install', ...tarballs, '--no-audit', '--no-fund', '--prefer-offline', '--silent'], app);
  install(tarball('chronos-timers'));
  const library = bytes(join(app, 'node_modules'));
  install(tarball('chronos-timers'), tarball('chronos-timers-server'));
  const both = bytes(join(app, 'node_modules'));
  const mb = (n) => (n / 1e6).toFixed(1);
  const server = both - library;
  process.stdout.write(
    `chronos-timers          installs ${mb(library)} MB (limit ${LIBRARY_LIMIT_MB} MB)` + '\n',
  );
  process.stdout.write(
    `chronos-timers-server   adds     ${mb(server)} MB beside it (limit ${SERVER_LIMIT_MB} MB)` + '\n',
  );
  for (const p of packed)
    process.stdout.write(`  ${p.filename}: ${p.entryCount} files, ${mb(p.size)} MB packed` + '\n');
  const tests = packed
    .flatMap((p) => p.files.map((f) => f.path))
    .filter((f) => /\.test\.|(^|\/)test\//.test(f));
  const failures = [
    library > LIBRARY_LIMIT_MB * 1e6 && `the library installs ${mb(library)} MB, over ${LIBRARY_LIMIT_MB} MB`,
    server > SERVER_LIMIT_MB * 1e6 && `the server adds ${mb(server)} MB, over ${SERVER_LIMIT_MB} MB`,
    tests.length > 0 && `a tarball holds tests: ${tests.slice(0, 5).join(', ')}`,
  ].filter(Boolean);
  for (const f of failures) process.stderr.write(`size check failed: ${f}` + '\n');
  if (failures.length > 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
