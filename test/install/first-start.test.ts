/**
 * What `npm install && npm start` in a fresh clone gets (issue 46): the `prepare` script builds
 * dist/ (compiled code and the embedded store's template) and can never fail an install;
 * `chronos` in a checkout runs that build only while it is a build of these very sources; and
 * nothing a plain install adds wants a newer Node than the package's `engines` (no EBADENGINE).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TMP_DIR } from '../support/env.js';

const ROOT = join(TMP_DIR, '..');
const SLOW = 60_000;

/** The lowest major of Node an `engines.node` range admits (`>=22.12.0` → 22; `^18 || >=20` → 18). */
function lowestMajor(range: string): number {
  const majors = range.split('||').map((alt) => Number(/(\d+)/.exec(alt)?.[1] ?? 0));
  return Math.min(...majors);
}

describe('a plain npm install', () => {
  it('adds no package that wants a newer Node than package.json engines (the benchmarks peers install apart)', () => {
    const ours = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      engines: { node: string };
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    const floor = lowestMajor(ours.engines.node);
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; engines?: { node?: string } }>;
    };
    const tooNew = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.engines?.node && lowestMajor(p.engines.node) > floor)
      .map(([path, p]) => `${path}@${p.version} (node ${p.engines!.node})`);
    expect(tooNew).toEqual([]);
    expect(Object.keys(ours.devDependencies)).not.toContain('pg-boss');
    expect(Object.keys(ours.devDependencies)).not.toContain('graphile-worker');
  });
});

describe('the prepare script (npm install in a checkout)', () => {
  let dir: string;
  beforeAll(() => {
    mkdirSync(TMP_DIR, { recursive: true });
    dir = mkdtempSync(join(TMP_DIR, 'prepare-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it(
    'never fails the install: a failed build is said in one line and it exits 0',
    () => {
      const npm = join(dir, 'failing-npm.js');
      writeFileSync(npm, "process.stderr.write('tsc: boom\\n'); process.exit(2);\n");
      const run = spawnSync(process.execPath, [join(ROOT, 'scripts/prepare.mjs')], {
        cwd: ROOT,
        env: { ...process.env, npm_execpath: npm, npm_command: 'install' },
        encoding: 'utf8',
      });
      expect(run.status).toBe(0);
      expect(run.stderr).toContain('chronos: building dist/ failed (tsc: boom); the install goes on');
    },
    SLOW,
  );
});

describe('bin/chronos.js in a checkout', () => {
  let checkout: string;
  const LIB = 'packages/chronos-timers';
  const SRV = 'packages/chronos-timers-server';
  const chronos = () =>
    spawnSync(process.execPath, [join(checkout, SRV, 'bin/chronos.js')], { cwd: checkout, encoding: 'utf8' });
  const stampBoth = () => {
    for (const pkg of [LIB, SRV]) {
      const stamp = spawnSync(
        process.execPath,
        [join(checkout, 'scripts/source-stamp.mjs'), '--write', join(checkout, pkg)],
        { encoding: 'utf8' },
      );
      expect(stamp.status, stamp.stderr).toBe(0);
    }
  };
  beforeAll(() => {
    mkdirSync(TMP_DIR, { recursive: true });
    checkout = mkdtempSync(join(TMP_DIR, 'checkout-'));
    for (const f of [
      `${SRV}/bin/chronos.js`,
      `${SRV}/bin/source-resolve.js`,
      `${SRV}/package.json`,
      `${SRV}/tsconfig.build.json`,
      `${LIB}/package.json`,
      `${LIB}/tsconfig.build.json`,
      'scripts/source-stamp.mjs',
      'package.json',
      'tsconfig.json',
    ]) {
      mkdirSync(join(checkout, f, '..'), { recursive: true });
      cpSync(join(ROOT, f), join(checkout, f));
    }
    cpSync(join(ROOT, LIB, 'migrations'), join(checkout, LIB, 'migrations'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'));
    mkdirSync(join(checkout, SRV, 'src/cli'), { recursive: true });
    mkdirSync(join(checkout, SRV, 'dist/cli'), { recursive: true });
    mkdirSync(join(checkout, LIB, 'src'), { recursive: true });
    mkdirSync(join(checkout, LIB, 'dist'), { recursive: true });
    writeFileSync(join(checkout, LIB, 'src/index.ts'), 'export {};\n');
    writeFileSync(join(checkout, SRV, 'src/cli/main.ts'), "process.stdout.write('sources');\n");
    writeFileSync(join(checkout, SRV, 'dist/cli/main.js'), "process.stdout.write('build');\n");
  });
  afterAll(() => rmSync(checkout, { recursive: true, force: true }));

  it(
    'runs dist/ while it is a build of these sources, and the sources as soon as one changes or the stamp is gone',
    () => {
      // No stamp: a build of unknown sources is never run.
      expect(chronos().stdout).toBe('sources');
      stampBoth();
      expect(chronos().stdout).toBe('build');
      // A source edited after the build: the build is stale, so the sources run.
      writeFileSync(join(checkout, SRV, 'src/cli/main.ts'), "process.stdout.write('sources');\n// edited\n");
      expect(chronos().stdout).toBe('sources');
      writeFileSync(join(checkout, SRV, 'src/cli/main.ts'), "process.stdout.write('sources');\n");
      expect(chronos().stdout).toBe('build');
      // The library's sources count too: one edited, the builds are stale.
      writeFileSync(join(checkout, LIB, 'src/index.ts'), 'export {};\n// edited\n');
      expect(chronos().stdout).toBe('sources');
      writeFileSync(join(checkout, LIB, 'src/index.ts'), 'export {};\n');
      expect(chronos().stdout).toBe('build');
      // A migration changed after the build: stale too.
      writeFileSync(join(checkout, LIB, 'migrations/999_later.sql'), 'SELECT 1;\n');
      expect(chronos().stdout).toBe('sources');
    },
    SLOW,
  );
});
