import { readFileSync } from 'node:fs';
import { URL } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The names `chronos-timers/internal` re-exports from the library's store (its tables and its
// driver), read from internal.ts itself so a name added there is covered without editing this.
// The boundary check (.dependency-cruiser.cjs) sees files, not names: this rule is what keeps a
// door from reaching the store through the one internal entry.
const internal = readFileSync(new URL('./packages/chronos-timers/src/internal.ts', import.meta.url), 'utf8');
const storeNames = [...internal.matchAll(/export\s*\{([^}]*)\}\s*from\s*'\.\/store\//g)].flatMap((m) =>
  m[1]
    .split(',')
    .map((name) => name.trim().replace(/^type\s+/, ''))
    .filter(Boolean),
);

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      'node_modules/**',
      '.chronos/**',
      '.chronos-*/**',
      '.tmp/**',
      'bench/scratch/**',
      'packages/*/bin/**',
      '.dependency-cruiser.cjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // HTTP, MCP and the CLI's commands are doors over the core services: what they read or change
    // goes through a service, never a store statement. (cli/main.ts, the executable's entry, is the
    // one exception: it starts opening the embedded store before the commands load.)
    files: ['packages/chronos-timers-server/src/{http,mcp,cli}/**/*.ts'],
    ignores: ['packages/chronos-timers-server/src/cli/main.ts', '**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'chronos-timers/internal',
              importNames: storeNames,
              message:
                'a door (HTTP, MCP, CLI) never reaches the store: call a core service, or add one (issue 47, "surfaces never import the store")',
            },
          ],
        },
      ],
    },
  },
  {
    // The dashboard's one module runs in the browser (type-checked by ui/tsconfig.json).
    files: ['packages/chronos-timers-server/ui/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        [
          'document',
          'window',
          'location',
          'sessionStorage',
          'fetch',
          'performance',
          'FormData',
          'URLSearchParams',
          'Intl',
          'HTMLElement',
          'HTMLInputElement',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
);
