/** Where the tests find their databases. */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
export const TMP_DIR = fileURLToPath(new URL('../../.tmp/', import.meta.url));

/** Per test run (the id is the runner's pid), so runs side by side never share a template. */
export const pgTemplateName = (runId: number) => `chronos_test_template_${runId}`;
export const liteTemplateFile = (runId: number) => join(TMP_DIR, `pglite-template-${runId}.tar.gz`);

/** The same server, another database. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
