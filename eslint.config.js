// @ts-check
import js from '@eslint/js'
import { defineConfig } from 'eslint/config'
import tseslint from 'typescript-eslint'

export default defineConfig(
  { ignores: ['dist/', 'coverage/', '.tap/', 'node_modules/'] },
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
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
