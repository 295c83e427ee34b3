/**
 * What a first start of `chronos serve` on the embedded store can do before it loads its own
 * modules: compile PGlite's WebAssembly module and unzip the store's template (for a store not
 * made yet). Both run off the event loop (V8 compiles on background threads, zlib on libuv's
 * thread pool), so they overlap the loading instead of following it. This module imports
 * nothing but Node's own, so starting it costs nothing.
 *
 * What was done ahead is handed to the next store opened (`openEmbedded`), once, and dropped by
 * it whether used or not: a process that opens no store keeps nothing. The template is unzipped
 * before the store's lock is taken, as reading the shipped file touches nothing of the store;
 * it is written into the store under the lock, as always.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { PGliteOptions } from '@electric-sql/pglite';

type WasmModule = NonNullable<PGliteOptions['pgliteWasmModule']>;
/** V8's WebAssembly API, which this project's TypeScript libraries do not declare. */
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> };

/** Where the build puts the template: `dist/embedded/` beside the compiled code, found from the sources too. */
export const TEMPLATE_FILE = fileURLToPath(
  new URL('../../../dist/embedded/pgdata-template.tar.gz', import.meta.url),
);

let compiled: Promise<WasmModule | undefined> | undefined;
let unzipped: { file: string; tar: Promise<Buffer | undefined> } | undefined;

/**
 * Starts compiling PGlite's module, and unzipping the template when `dataDir` has no store yet
 * (once each). A failure is left for the open to meet and report as it would have.
 */
export function startEmbeddedAhead(dataDir: string): void {
  compiled ??= readFile(createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm'))
    .then((bytes) => WebAssembly.compile(bytes))
    .catch(() => undefined);
  if (!unzipped && !existsSync(join(resolve(dataDir), 'pgdata')) && existsSync(TEMPLATE_FILE)) {
    unzipped = { file: TEMPLATE_FILE, tar: unzip(TEMPLATE_FILE).catch(() => undefined) };
  }
}

/**
 * Unzips a gzipped file on libuv's thread pool into one buffer of the size gzip records (its
 * last four bytes): in zlib's 16 kB pieces the template took longer and stayed in the process's
 * heap afterwards, resident for good (bench/README.md, "Figures from the store's comments").
 */
export async function unzip(file: string): Promise<Buffer> {
  const packed = await readFile(file);
  const size = packed.length >= 4 ? packed.readUInt32LE(packed.length - 4) : 0;
  return promisify(gunzip)(packed, { chunkSize: Math.max(size + 1, 64 << 10) });
}

/** What was done ahead, handed over once: the compiled module, and the template `file` unzipped if it was. */
export async function takeAhead(file: string | null): Promise<{ module?: WasmModule; tar?: Buffer }> {
  const [module, tar] = [compiled, unzipped?.file === file ? unzipped?.tar : undefined];
  compiled = undefined;
  unzipped = undefined;
  return { module: await module, tar: await tar };
}
