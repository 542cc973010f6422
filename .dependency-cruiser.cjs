/**
 * dependency-cruiser (`npm run deps`, part of `npm run check`; test/repo/import-cycles.test.ts
 * runs it in `npm test`): no circular import anywhere in the repository's TypeScript, type-only
 * imports included. Which workspace may import which is test/repo/workspace-deps.test.ts.
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A module that imports itself through others: split what both need into a module of its own.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['node_modules', '(^|/)\\.infra/', '(^|/)dist/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Workspace packages resolve to their sources, as Node and vitest resolve them.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['ctxflow-source', 'import', 'node', 'default'],
      extensions: ['.ts', '.js', '.json'],
    },
  },
};
