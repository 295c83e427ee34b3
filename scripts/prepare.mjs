// `npm install` / `npm ci` in a checkout run this (the `prepare` script): it builds dist/ — the
// compiled code and the embedded store's migrated template — so that `npm start` starts from
// compiled code and a new store is copied from the template instead of running `initdb` (bin/
// chronos.js runs dist/ only while it is a build of these very sources). It can never break an
// install: a failed build is said in one line and the install goes on; `npm start` then runs the
// sources, and a new store's first start takes seconds instead of about one. `npm pack` and
// `npm publish` build through `prepack`, where a failure must stop them, so this steps aside.
import { spawnSync } from 'node:child_process';
import process from 'node:process';

const command = process.env.npm_command;
if (command === 'pack' || command === 'publish') process.exit(0);

const npm = process.env.npm_execpath;
const run = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
    })
  : spawnSync('npm', ['run', 'build'], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
if (run.status !== 0) {
  const why = (run.error?.message ?? run.stderr ?? '').trim().split('\n').slice(-3).join(' / ');
  process.stderr.write(
    `chronos: building dist/ failed (${why || `exit ${run.status}`}); the install goes on, and \`npm start\` ` +
      'will run the sources, slower to start (run `npm run build` to see why)\n',
  );
}
