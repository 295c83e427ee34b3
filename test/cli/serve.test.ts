/**
 * `chronos serve` as a process on a new embedded store, as the command runs it (bin/chronos.js →
 * src/cli/main.ts): PGlite's WebAssembly compiled ahead and run by V8's baseline compiler, the
 * template unpacked, MCP loaded at its first exchange. Started, used, stopped by SIGTERM, and
 * started again on the same directory. Waits for log lines, never for a duration.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, childEnv, freePort, runChronos, Spawned, tempDataDir } from './support.js';

const DID = 'did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:serve';

describe('CLI: chronos serve on a new embedded store, then again on the same one', () => {
  let data: Awaited<ReturnType<typeof tempDataDir>>;
  let port: number;
  const spawned: Spawned[] = [];
  const serve = async () => {
    const server = new Spawned(process.execPath, [BIN, 'serve'], {
      env: childEnv({ CHRONOS_DATA_DIR: data.dir, PORT: String(port), HOST: '127.0.0.1' }),
    });
    spawned.push(server);
    await server.waitFor(/chronos is serving/);
    return server;
  };
  beforeAll(async () => {
    data = await tempDataDir();
    port = await freePort();
  });
  afterAll(async () => {
    for (const server of spawned) await server.stop();
    await data.remove();
  });

  it('serves /v1 and /mcp, stops on SIGTERM with 0, and restarts with its timers', async () => {
    const first = await serve();
    const created = await runChronos(['keys', 'create', '--owner', DID], { CHRONOS_DATA_DIR: data.dir });
    expect(created.code, created.stderr).toBe(0);
    const auth = { authorization: `Bearer ${created.stdout.trimEnd().split('\n').at(-1)!}` };
    const base = `http://127.0.0.1:${port}`;
    const made = await fetch(`${base}/v1/alarms`, {
      method: 'POST',
      headers: auth,
      body: '{"in_seconds": 600}',
    });
    expect(made.status).toBe(201);
    const { id } = ((await made.json()) as { alarm: { id: string } }).alarm;

    const mcp = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'test', version: '1' },
        },
      }),
    });
    expect(mcp.status).toBe(200);
    expect(
      ((await mcp.json()) as { result: { serverInfo: { name: string } } }).result.serverInfo.name,
    ).toBeTruthy();

    first.signal('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true);

    await serve();
    const kept = await fetch(`${base}/v1/alarms/${id}`, { headers: auth });
    expect(kept.status, await kept.clone().text()).toBe(200);
  }, 120_000);
});
