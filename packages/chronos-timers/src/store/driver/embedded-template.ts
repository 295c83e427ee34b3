/**
 * The embedded store's template: a PGlite data directory with every migration applied, made at
 * build time (`npm run build` writes `dist/embedded/pgdata-template.tar.gz`) and copied into a
 * new store instead of running `initdb` in WebAssembly. That `initdb` is what made a first start
 * slow and heavy: much CPU and a second and third WebAssembly instance alive at once.
 *
 * Guarantees: a store is made from the template whole or not at all — the files are written
 * into a sibling directory that is renamed into place last, so a crash while copying leaves no
 * half-made store behind (the next start copies again). The template may be older than the
 * migrations (a newer Chronos over an older build): opening applies the ones it lacks, as for
 * any store.
 *
 * A template is used only when it fits: made by the same PGlite version (another may be another
 * PostgreSQL major, whose files it cannot read), and every migration it holds still reads as it
 * did (a checkout whose migration changed since its last build must not get the old one). Its
 * stamp (`pgdata-template.json` beside it) says both.
 *
 * Not promised: a template exists. Running from the sources without a build there is none, and
 * the store is initialised as before (`initdb`, then every migration): slow, and correct.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, join, normalize, sep } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { LiteDb } from './db.js';
import { TEMPLATE_FILE, unzip } from './embedded-ahead.js';
import { migrate, migrationFiles, MIGRATIONS_DIR } from './migrate.js';

export { TEMPLATE_FILE };

/** What a template was made from: the PGlite version and each migration's SHA-256. */
export interface TemplateStamp {
  pglite: string;
  migrations: Record<string, string>;
}

const stampFile = (template: string) => template.replace(/\.tar\.gz$/, '') + '.json';

/**
 * The template at `file` if it fits this PGlite and the migrations of `migrationsDir` (see the
 * module comment), else null: there is none, it has no stamp, or the stamp differs.
 */
export async function usableTemplate(
  file = TEMPLATE_FILE,
  migrationsDir = MIGRATIONS_DIR,
): Promise<string | null> {
  let stamp: TemplateStamp;
  try {
    stamp = JSON.parse(await readFile(stampFile(file), 'utf8')) as TemplateStamp;
  } catch {
    return null;
  }
  const current = await stampOf(migrationsDir);
  if (stamp.pglite !== current.pglite) return null;
  for (const [name, hash] of Object.entries(stamp.migrations)) {
    if (current.migrations[name] !== hash) return null;
  }
  return file;
}

async function stampOf(migrationsDir: string): Promise<TemplateStamp> {
  const migrations: Record<string, string> = {};
  for (const file of await migrationFiles(migrationsDir)) {
    migrations[file] = createHash('sha256')
      .update(await readFile(join(migrationsDir, file)))
      .digest('hex');
  }
  return { pglite: pgliteVersion(), migrations };
}

function pgliteVersion(): string {
  // The package exports its WebAssembly file but not its package.json: found beside it.
  const wasm = createRequire(import.meta.url).resolve('@electric-sql/pglite/pglite.wasm');
  const pkg = createRequire(import.meta.url)(join(dirname(wasm), '..', 'package.json')) as {
    version: string;
  };
  return pkg.version;
}

/**
 * Makes a template: a fresh PGlite in memory, the migrations of `migrationsDir` applied, a
 * checkpoint (so every page is in its file, not only in the WAL), then its data directory as a
 * gzipped tar (`PGlite.dumpDataDir`), and its stamp. Written to a temporary name and renamed, so
 * a reader never sees half a file; the stamp is written last, so a template without one (an
 * interrupted build) is not used.
 */
export async function buildTemplate(file: string, migrationsDir = MIGRATIONS_DIR): Promise<void> {
  const lite = await PGlite.create();
  try {
    await migrate(new LiteDb(lite), migrationsDir);
    await lite.exec('CHECKPOINT');
    const dump = await lite.dumpDataDir('gzip');
    await mkdir(dirname(file), { recursive: true });
    const partial = `${file}.partial-${process.pid}`;
    await rm(stampFile(file), { force: true });
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()));
    await rename(partial, file);
    await writeFile(stampFile(file), `${JSON.stringify(await stampOf(migrationsDir), null, 2)}\n`);
  } finally {
    await lite.close();
  }
}

/**
 * Copies the template into `pgdata`, which must not exist: unpacked beside it, then renamed into
 * place; from `unzipped` when the archive was unzipped already (`embedded-ahead.ts`). A
 * `postmaster.pid` in the template (it was dumped from a running PGlite) is left out, as a store
 * closed cleanly has none. Called under the store's lock, so a half-made copy found
 * beside `pgdata` is a crashed process's and is removed.
 */
export async function copyTemplate(template: string, pgdata: string, unzipped?: Buffer): Promise<void> {
  const prefix = `${basename(pgdata)}.partial-`;
  for (const left of (await readdir(dirname(pgdata))).filter((f) => f.startsWith(prefix))) {
    await rm(join(dirname(pgdata), left), { recursive: true, force: true });
  }
  const partial = `${pgdata}.partial-${process.pid}`;
  try {
    const tar = unzipped ?? (await unzip(template));
    await untar(tar, partial);
    release(tar);
    await rename(partial, pgdata);
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    throw new Error(`copying the embedded store's template ${template} into ${pgdata} failed`, {
      cause: error,
    });
  }
}

/**
 * Lets the memory of an unzipped template go at the next minor collection. One unzipped ahead
 * (`embedded-ahead.ts`) has lived through the collections of a server loading its modules, and
 * a buffer that old goes only at a major collection, which an idle server may not run for a
 * long time: measured, it stayed resident (bench/README.md, "Figures from the store's
 * comments"). Transferring its memory
 * to a new, unreferenced ArrayBuffer leaves the old one empty and the memory with a young one.
 */
function release(buffer: Buffer): void {
  // Never one of Node's shared 8 kB pools, which other buffers use too.
  const memory = buffer.buffer;
  if (memory instanceof ArrayBuffer && memory.byteLength > Buffer.poolSize) {
    structuredClone(memory, { transfer: [memory] });
  }
}

const BLOCK = 512;

/** Files written at once while unpacking: ~1,000 small files one after another spent most of a first start waiting. */
const WRITES_AT_ONCE = 16;

/**
 * Unpacks a ustar archive (as PGlite's `dumpDataDir` writes it: regular files and directories)
 * under `root`; directories 0700 and files 0600, as PostgreSQL wants its data directory. Any
 * other entry type, or a path that leaves `root`, is refused before anything is written. The
 * directories are made first, then the files are written `WRITES_AT_ONCE` at a time.
 */
async function untar(archive: Buffer, root: string): Promise<void> {
  const dirs = [root];
  const files: { path: string; body: Buffer }[] = [];
  let at = 0;
  while (at + BLOCK <= archive.length) {
    const header = archive.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) break;
    const name = field(header, 0, 100);
    const prefix = field(header, 345, 155);
    const size = parseInt(field(header, 124, 12).trim() || '0', 8);
    const type = String.fromCharCode(header[156] || 0x30);
    const path = inside(root, prefix ? `${prefix}/${name}` : name);
    const body = archive.subarray(at + BLOCK, at + BLOCK + size);
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (type === '5') {
      dirs.push(path);
    } else if (type === '0' || type === '\0') {
      if (path.endsWith(`${sep}postmaster.pid`) && dirname(path) === normalize(root)) continue;
      dirs.push(dirname(path));
      files.push({ path, body });
    } else {
      throw new Error(
        `tar entry ${JSON.stringify(name)}: expected a file or a directory, got type ${JSON.stringify(type)}`,
      );
    }
  }
  for (const dir of new Set(dirs)) await mkdir(dir, { recursive: true, mode: 0o700 });
  let next = 0;
  const writer = async () => {
    while (next < files.length) {
      const { path, body } = files[next++]!;
      await writeFile(path, body, { mode: 0o600 });
    }
  };
  await Promise.all(Array.from({ length: WRITES_AT_ONCE }, writer));
}

function field(header: Buffer, offset: number, length: number): string {
  const raw = header.subarray(offset, offset + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString('utf8');
}

function inside(root: string, name: string): string {
  const path = normalize(join(root, name));
  if (path !== normalize(root) && !path.startsWith(normalize(root) + sep)) {
    throw new Error(`tar entry ${JSON.stringify(name)}: expected a path inside the data directory`);
  }
  return path;
}
