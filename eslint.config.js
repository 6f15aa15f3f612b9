// @ts-check
import js from '@eslint/js'
import { defineConfig } from 'eslint/config'
import tseslint from 'typescript-eslint'

export default defineConfig(
  { ignores: ['dist/', 'coverage/', '.tap/', 'node_modules/', '_output/', '.local/', '.e2e/'] },
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js', 'bin/*.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
  {
    // The installed command's entry point: plain JavaScript for Node.js, which may be an old one.
    files: ['bin/*.js'],
    languageOptions: { globals: { process: 'readonly' } },
  },
  {
    // One YAML library for every job: js-yaml (src/config/yaml.ts). `yaml` is a devDependency only
    // so that bench/cli.ts can measure the parser it replaced.
    files: ['**/*.ts'],
    ignores: ['bench/cli.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: [{ name: 'yaml', message: 'use js-yaml, the project\'s one YAML library (src/config/yaml.ts reads YAML)' }] }],
    },
  },
  {
    // tap's t.test() returns a promise that tap itself awaits.
    files: ['test/**', 'bench/**', 'hack/**'],
    rules: {
      'no-console': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-floating-promises': 'off',
      '@typescript-eslint/unbound-method': 'off',
    },
  },
  {
    // @kubernetes/client-node declares its API objects (V1ServiceCIDR, V1Service, ...) as classes
    // with public fields only, and its clients take plain objects: building them as literals is the
    // library's documented use, not an unsafe assignment.
    files: ['test/e2e/**'],
    rules: {
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
    },
  },
)
