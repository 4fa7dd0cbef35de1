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
              group: ['**/webhooks/*', '**/boarding/*', '**/platform/*', '**/platform/**'],
              message:
                'src/store imports nothing from webhooks/, boarding/ or platform/ (they depend on the store; shared API shapes are in src/contract).',
            },
          ],
        },
      ],
    },
  },
  {
    // The mapping engine is pure: bank engineers' expressions must never reach I/O.
    files: ['src/mapping/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*'],
              message: 'src/mapping is pure: no node:* imports (src/mapping-sets reads the files).',
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
              group: ['**/core/*', '**/core/**'],
              message:
                'src/mapping imports nothing from the cores: what it needs of a layout is an interface it owns (types.ts LayoutColumnsView); src/mapping-sets joins the engine with core/file/layout.',
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
