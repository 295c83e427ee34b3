/**
 * What ships is what is tested (contract §9): `npm pack --workspaces` makes the two tarballs
 * (building each on prepack), which hold no tests. The library's installs alone into an empty
 * application; there, with no build step of the application's, `import { createChronos } from
 * 'chronos-timers'` type-checks under `strict` without `skipLibCheck` and fires a timer, and
 * `dataDir` without PGlite says which package to add. With the server's beside it, `npx chronos`
 * answers `--version` and serves.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { ROOT } from '../cli/support.js';
// @ts-expect-error: a plain ES module of the repository's scripts, without declarations
import { buildIsCurrent } from '../../scripts/source-stamp.mjs';

const LIBRARY_DIR = join(ROOT, 'packages', 'chronos-timers');
const SERVER_DIR = join(ROOT, 'packages', 'chronos-timers-server');

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

// The same application in TypeScript (type-checked against the package's declarations) and in
// plain JavaScript (run as most applications would).
const source = (ts: boolean) => `import { createChronos } from 'chronos-timers';

const chronos = await createChronos({ databaseUrl: process.env.DATABASE_URL${ts ? '!' : ''} });
await chronos.migrate();
const timer = await chronos.scheduleMany(null, [{ key: 'installed:1', at: new Date(), payload: { n: 1 } }]);
const fired = await new Promise${ts ? '<string>' : ''}((resolve) => {
  const worker = chronos.work((fire) => {
    void worker.stop().then(() => resolve(fire.key));
  });
});
console.log(\`fired \${fired} (\${timer[0]${ts ? '!' : ''}.queue})\`);
await chronos.close();
`;

describePostgresOnly(
  'the installed application fires a timer on the test PostgreSQL',
  'the packed package',
  () => {
    let dir: string;
    /** An application with the library alone. */
    let lib: string;
    /** An application with the library and the server. */
    let app: string;
    const tarballs: Record<'chronos-timers' | 'chronos-timers-server', string> = {
      'chronos-timers': '',
      'chronos-timers-server': '',
    };
    let t: TestDatabase;
    const emptyApp = async (name: string, ...install: string[]) => {
      const at = join(dir, name);
      await run('mkdir', ['-p', at]);
      await writeFile(
        join(at, 'package.json'),
        JSON.stringify({ name: `empty-${name}`, version: '1.0.0', private: true, type: 'module' }),
      );
      await run(NPM, ['install', ...install, '--no-audit', '--no-fund', '--prefer-offline', '--silent'], {
        cwd: at,
        maxBuffer: 1 << 24,
      });
      return at;
    };

    beforeAll(async () => {
      t = await createTestDatabase('postgres');
      // Outside the checkout: nothing of its node_modules can be found from the applications.
      dir = await mkdtemp(join(tmpdir(), 'chronos-pack-'));
      // Builds of these very sources are packed as they are: a rebuild (prepack) would take dist/
      // away under the other test files' `chronos` processes for a few seconds.
      const current = [LIBRARY_DIR, SERVER_DIR].every((d) => buildIsCurrent(d));
      const pack = ['pack', '--workspaces', '--json', '--pack-destination', dir];
      const { stdout } = await run(NPM, current ? [...pack, '--ignore-scripts'] : pack, {
        cwd: ROOT,
        maxBuffer: 1 << 26,
      });
      for (const packed of JSON.parse(stdout) as { name: keyof typeof tarballs; filename: string }[]) {
        tarballs[packed.name] = join(dir, packed.filename);
      }
      lib = await emptyApp('lib', tarballs['chronos-timers']);
      app = await emptyApp('app', tarballs['chronos-timers'], tarballs['chronos-timers-server']);
    }, 240_000);

    afterAll(async () => {
      await t?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    const listing = async (tarball: string) =>
      (await run('tar', ['-tzf', tarball], { maxBuffer: 1 << 24 })).stdout.trim().split('\n');

    it('the library holds dist, migrations and the embedded template, and no tests', async () => {
      const files = await listing(tarballs['chronos-timers']);
      expect(files).toContain('package/dist/index.js');
      expect(files).toContain('package/dist/index.d.ts');
      expect(files.some((f) => f.startsWith('package/migrations/0001_'))).toBe(true);
      // The embedded store's migrated template and its stamp (store's embedded-template.ts).
      expect(files).toContain('package/dist/embedded/pgdata-template.tar.gz');
      expect(files).toContain('package/dist/embedded/pgdata-template.json');
      expect(files.filter((f) => /\.test\.|\/test\//.test(f) || f.startsWith('package/src/'))).toEqual([]);
    });

    it('the server holds dist, bin and the dashboard page, and no tests', async () => {
      const files = await listing(tarballs['chronos-timers-server']);
      expect(files).toContain('package/dist/cli/main.js');
      expect(files).toContain('package/bin/chronos.js');
      expect(files.filter((f) => f.startsWith('package/ui/')).sort()).toEqual([
        'package/ui/dashboard.css',
        'package/ui/dashboard.js',
        'package/ui/index.html',
      ]);
      expect(files.filter((f) => /\.test\.|\/test\//.test(f) || f.startsWith('package/src/'))).toEqual([]);
    });

    it('the library alone brings neither the server’s dependencies nor PGlite', () => {
      for (const name of [
        'fastify',
        '@modelcontextprotocol',
        'prom-client',
        'undici',
        '@electric-sql',
        'chronos-timers-server',
      ]) {
        expect(existsSync(join(lib, 'node_modules', name)), name).toBe(false);
      }
    });

    it('dataDir without PGlite installed is refused, naming the package to add', async () => {
      await writeFile(
        join(lib, 'embedded.mjs'),
        `import { createChronos } from 'chronos-timers';
try {
  await createChronos({ dataDir: './.chronos' });
  console.log('opened');
} catch (error) {
  console.log(error.message);
}
`,
      );
      const { stdout } = await run(process.execPath, ['embedded.mjs'], { cwd: lib });
      expect(stdout).toContain('@electric-sql/pglite');
      expect(stdout).toContain('npm install @electric-sql/pglite');
    }, 60_000);

    it('type-checks (strict, no skipLibCheck) and fires a timer from an application with no build step of its own', async () => {
      const app = lib;
      await writeFile(join(app, 'app.ts'), source(true));
      await writeFile(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            strict: true,
            noEmit: true,
            // The declaration files the library brings are checked too (contract §9).
            skipLibCheck: false,
            types: ['node'],
            typeRoots: [join(ROOT, 'node_modules/@types')],
          },
          files: ['app.ts'],
        }),
      );
      // The application's own compiler would do; the project's stands in for it.
      await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', app], { cwd: app });
      // Plain JavaScript, as most applications would run it.
      await writeFile(join(app, 'app.mjs'), source(false));
      const { stdout } = await run(process.execPath, ['app.mjs'], {
        cwd: app,
        env: { ...process.env, DATABASE_URL: t.url! },
      });
      expect(stdout.trim()).toBe('fired installed:1 (default)');
    }, 60_000);

    it('npx chronos answers --version and serves', async () => {
      const { stdout } = await run('npx', ['--no-install', 'chronos', '--version'], { cwd: app });
      expect(stdout.trim()).toMatch(/^chronos-timers \d+\.\d+\.\d+/);
      const serve = spawn('npx', ['--no-install', 'chronos', 'serve'], {
        cwd: app,
        env: { ...process.env, DATABASE_URL: t.url!, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
        // Its own process group: npx runs the server as its child, and both are stopped together.
        detached: true,
      });
      const exited = new Promise<number | null>((resolve) => serve.on('exit', resolve));
      // 'close' comes once the output pipes are closed too: every line written has been read.
      const closed = new Promise<void>((resolve) => serve.on('close', () => resolve()));
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        serve.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const match = /chronos is serving on (http:\/\/\S+?)"/.exec(out);
          if (match) resolve(match[1]!);
        });
        void exited.then(() => reject(new Error(`serve exited:\n${out}`)));
      });
      const health = await fetch(`${url}/readyz`);
      expect(health.status).toBe(200);
      // The dashboard is served from the installed package itself (issue 17).
      const page = await fetch(`${url}/ui`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<script type="module" src="/ui/dashboard.js">');
      expect((await fetch(`${url}/ui/dashboard.js`)).status).toBe(200);
      process.kill(-serve.pid!, 'SIGTERM');
      await closed;
      expect(out).toContain('"msg":"stopped"');
    }, 60_000);

    it('npx chronos serve makes a new embedded store from the shipped template, with nothing left to migrate', async () => {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        CHRONOS_DATA_DIR: join(app, '.chronos-new'),
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
      };
      delete env.DATABASE_URL;
      const serve = spawn('npx', ['--no-install', 'chronos', 'serve'], { cwd: app, env, detached: true });
      const closed = new Promise<void>((resolve) => serve.on('close', () => resolve()));
      let out = '';
      await new Promise<void>((resolve, reject) => {
        serve.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('chronos is serving on')) resolve();
        });
        serve.on('exit', () => reject(new Error(`serve exited:\n${out}`)));
      });
      process.kill(-serve.pid!, 'SIGTERM');
      await closed;
      expect(out).toContain('"store":"embedded"');
      // The template is current: the first start applies no migration (initdb would apply them all).
      expect(out).not.toContain('migrations applied');
      expect(existsSync(join(app, '.chronos-new', 'pgdata', 'PG_VERSION'))).toBe(true);
    }, 60_000);
  },
);
