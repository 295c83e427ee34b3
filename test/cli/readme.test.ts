/**
 * The README's walk-through, run as written: `npm start` on a fresh data directory, then each
 * shell block marked `<!-- walkthrough -->`, in order, in bash. The only changes are the port
 * (a free one instead of 8080) and the data directory (a temporary one instead of ./.chronos),
 * both given the way a user would: through PORT and CHRONOS_DATA_DIR.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { childEnv, freePort, ROOT, Spawned, tempDataDir } from './support.js';

/** The shell blocks that follow a `<!-- walkthrough -->` marker, in order. */
export function walkthroughBlocks(markdown: string): string[] {
  const blocks: string[] = [];
  const marker = /<!-- walkthrough -->\s*```sh\n([\s\S]*?)```/g;
  for (const match of markdown.matchAll(marker)) blocks.push(match[1]!);
  return blocks;
}

function bash(script: string, env: NodeJS.ProcessEnv): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-e', '-o', 'pipefail', '-c', script], { cwd: ROOT, env }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stdout}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

let data: Awaited<ReturnType<typeof tempDataDir>>;
let server: Spawned;
let port: number;

beforeAll(async () => {
  data = await tempDataDir();
  port = await freePort();
  server = new Spawned('npm', ['start'], {
    env: childEnv({ CHRONOS_DATA_DIR: data.dir, PORT: String(port) }),
  });
  await server.waitFor(/chronos is serving/);
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await data?.remove();
});

it('the README walk-through works as written: a first alarm created, listed, fired and acknowledged', async () => {
  const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
  const blocks = walkthroughBlocks(readme);
  expect(blocks).toHaveLength(3);
  for (const block of blocks) expect(block).toContain('localhost:8080');
  const env = childEnv({ CHRONOS_DATA_DIR: data.dir });
  const local = (block: string) => block.replaceAll('localhost:8080', `localhost:${port}`);
  const state = join(data.dir, 'walkthrough.env');
  // Variables set by one block (KEY) are carried into the next, as in one terminal.
  const keep = (block: string) => {
    const names = [...block.matchAll(/^([A-Z_]+)=/gm)].map((m) => m[1]);
    return names.length ? `\ndeclare -p ${names.join(' ')} >> '${state}'\n` : '';
  };

  const first = await bash(local(blocks[0]!) + keep(blocks[0]!), env);
  const [created, listed] = first.stdout.split(/(?<=\})(?=\{"alarms")/);
  const alarm = JSON.parse(created!).alarm;
  expect(JSON.parse(created!).deduped).toBe(false);
  expect(alarm).toMatchObject({ label: 'first alarm', status: 'active', wake_message: 'check the build' });
  expect(created).toContain('"payload":{"build": 12345678901234567890}');
  expect(JSON.parse(listed!).alarms.map((a: { id: string }) => a.id)).toEqual([alarm.id]);

  // "Five seconds later the first terminal logs the wake."
  const fired = JSON.parse(await server.waitFor(/alarm fired/));
  expect(fired).toMatchObject({ alarmId: alarm.id, label: 'first alarm', wakeMessage: 'check the build' });

  const second = await bash(`source '${state}'\n${local(blocks[1]!)}`, env);
  const [firedList, ack] = second.stdout.split(/(?<=\})(?=\{"wake")/);
  expect(JSON.parse(firedList!).alarms).toEqual([expect.objectContaining({ id: alarm.id, status: 'fired' })]);
  expect(JSON.parse(ack!).wake).toMatchObject({
    id: fired.wakeId,
    status: 'acknowledged',
    ack_note: 'build checked',
  });

  // Pause and resume: paused with no next fire, then active at the next weekday 09:00 in Paris.
  const third = await bash(`source '${state}'\n${local(blocks[2]!)}`, env);
  const [paused, resumed] = third.stdout.split(/(?<=\})(?=\{"alarm")/).map((text) => JSON.parse(text!).alarm);
  expect(paused).toMatchObject({ label: 'standup', status: 'paused' });
  expect(paused.next_fire_at).toBeUndefined();
  expect(resumed).toMatchObject({ id: paused.id, status: 'active' });
  expect(Date.parse(resumed.next_fire_at)).toBeGreaterThan(Date.now());
  expect(new Date(resumed.next_fire_at).getUTCMinutes()).toBe(0);

  // Ctrl-C stops it cleanly.
  server.signal('SIGINT');
  await server.waitFor(/"msg":"stopped"/);
}, 60_000);
