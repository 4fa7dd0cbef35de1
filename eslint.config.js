// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'var/**', 'coverage/**', '.bench/**', 'docker/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'ExportDefaultDeclaration', message: 'Named exports only (design.md).' },
      ],
    },
  },
  {
    // store/ owns SQLite: every table is behind one of its repositories, so the schema has one owner.
    files: ['src/**/*.ts'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['better-sqlite3'],
              message: 'Only src/store talks to SQLite: add a repository method there.',
            },
          ],
        },
      ],
    },
  },
  {
    // The store is below the pipeline and the receiver: they call it, never the other way round.
    files: ['src/store/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '**/webhooks/*',
                '**/boarding/*',
                '**/platform/*',
                '**/platform/**',
                '**/core/*',
                '**/core/**',
              ],
              message:
                'src/store imports nothing from webhooks/, boarding/, platform/ or core/ (they depend on the store; it implements their ports structurally, src/app wires them; shared API shapes are in src/contract).',
            },
          ],
        },
      ],
    },
  },
  {
    // Ports belong to their users (issue 34): the platform client owns its rate-ledger port
    // (platform/rate-budget/ledger.ts), the cores their batch and cross-reference stores
    // (core/file/batch-store.ts, core/external-refs.ts); the store implements them and src/app wires.
    files: ['src/platform/**/*.ts', 'src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/store/*', '**/store/**'],
              message:
                'src/platform and src/core import nothing from src/store: declare the port here and let src/app hand in the store.',
            },
            // Repeated from the rule above: a later no-restricted-imports replaces it for these files.
            {
              group: ['better-sqlite3'],
              message: 'Only src/store talks to SQLite: add a repository method there.',
            },
          ],
        },
      ],
    },
  },
  {
    // The mapping engine is pure: bank engineers' expressions must never reach I/O.
    files: ['src/mapping/**/*.ts'],
    ignores: ['src/mapping/loader.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*'],
              message: 'src/mapping is pure: no node:* imports (only loader.ts does I/O).',
            },
            {
              group: ['undici', 'better-sqlite3', 'pino', 'pino-*', 'express'],
              message: 'src/mapping is pure: no I/O libraries.',
            },
            {
              group: ['**/platform/*', '**/platform/**'],
              message:
                'src/mapping never depends on the platform client: the API shapes are in src/contract.',
            },
            {
              group: ['fs', 'path', 'http', 'https', 'net', 'child_process', 'os'],
              message: 'src/mapping is pure: no Node built-ins.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', 'eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/unbound-method': 'off',
    },
  },
);
