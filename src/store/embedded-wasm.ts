/**
 * PGlite's WebAssembly module compiled ahead of opening the embedded store. `chronos serve`
 * starts the compiling before it loads its own modules: V8 compiles on background threads, so
 * the two overlap instead of following each other, and the store opens with the module ready.
 * This module imports nothing but Node's own, so starting it costs nothing.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { PGliteOptions } from '@electric-sql/pglite';

type WasmModule = NonNullable<PGliteOptions['pgliteWasmModule']>;
/** V8's WebAssembly API, which this project's TypeScript libraries do not declare. */
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<WasmModule> };

let compiled: Promise<WasmModule | undefined> | undefined;

/** Starts compiling PGlite's module (once). A failure is left for PGlite to meet and report itself. */
export function compilePgliteAhead(): void {
  compiled ??= readFile(createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm'))
    .then((bytes) => WebAssembly.compile(bytes))
    .catch(() => undefined);
}

/** The module compiled ahead, handed to the first store opened after; undefined when none was. */
export function takeCompiledPglite(): Promise<WasmModule | undefined> {
  const module = compiled;
  compiled = undefined;
  return module ?? Promise.resolve(undefined);
}
