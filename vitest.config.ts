import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests run the library's sources: `chronos-timers` and `chronos-timers/internal` (the server's
// two doors into it) resolve to them, as in the type check (tsconfig.check.json's paths).
const library = (file: string) =>
  fileURLToPath(new URL(`./packages/chronos-timers/src/${file}`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^chronos-timers\/internal$/, replacement: library('internal.ts') },
      { find: /^chronos-timers$/, replacement: library('index.ts') },
    ],
  },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
