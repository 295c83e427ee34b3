import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
