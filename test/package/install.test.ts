/**
 * What ships is what is tested: `npm pack` makes the tarball (building it on prepack), which holds
 * no tests; it installs into an empty application with `npm install <tarball>`; there, with no
 * build step of the application's, `import { createChronos } from 'chronos-timers'` type-checks
 * and fires a timer, and `npx chronos` answers `--version` and serves.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describePostgresOnly } from '../support/backends.js';
import { createTestDatabase, type TestDatabase } from '../support/databases.js';
import { ROOT } from '../cli/support.js';

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
    let app: string;
    let tarball: string;
    let t: TestDatabase;

    beforeAll(async () => {
      t = await createTestDatabase('postgres');
      dir = await mkdtemp(join(ROOT, '.tmp', 'pack-'));
      await run(NPM, ['pack', '--pack-destination', dir, '--silent'], { cwd: ROOT, maxBuffer: 1 << 24 });
      const [file] = (await readdir(dir)).filter((f) => f.endsWith('.tgz'));
      tarball = join(dir, file!);
      app = join(dir, 'app');
      await run('mkdir', ['-p', app]);
      await writeFile(
        join(app, 'package.json'),
        JSON.stringify({ name: 'empty-app', version: '1.0.0', private: true, type: 'module' }),
      );
      await run(NPM, ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline', '--silent'], {
        cwd: app,
        maxBuffer: 1 << 24,
      });
    }, 180_000);

    afterAll(async () => {
      await t?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('holds dist, bin, migrations and the dashboard page, and no tests', async () => {
      const { stdout } = await run('tar', ['-tzf', tarball], { maxBuffer: 1 << 24 });
      const files = stdout.trim().split('\n');
      expect(files).toContain('package/dist/index.js');
      expect(files).toContain('package/dist/index.d.ts');
      expect(files).toContain('package/bin/chronos.js');
      expect(files.some((f) => f.startsWith('package/migrations/0001_'))).toBe(true);
      expect(files.filter((f) => f.startsWith('package/ui/')).sort()).toEqual([
        'package/ui/dashboard.css',
        'package/ui/dashboard.js',
        'package/ui/index.html',
      ]);
      // The embedded store's migrated template and its stamp (src/store/embedded-template.ts).
      expect(files).toContain('package/dist/embedded/pgdata-template.tar.gz');
      expect(files).toContain('package/dist/embedded/pgdata-template.json');
      expect(files.filter((f) => /\.test\.|\/test\//.test(f) || f.startsWith('package/src/'))).toEqual([]);
    });

    it('type-checks and fires a timer from an application with no build step of its own', async () => {
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
            // As applications have it: the dependencies' own declaration files are not checked.
            skipLibCheck: true,
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
