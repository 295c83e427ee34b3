// The boundaries of the house (issue 47), checked by `npm run boundaries` in `npm test`. Each rule
// says why in its comment; a breach fails the check with the rule's name and the import.
const LIB = '^packages/chronos-timers/src/';
const SRV = '^packages/chronos-timers-server/src/';

module.exports = {
  forbidden: [
    {
      name: 'library-not-server',
      comment:
        'the library (chronos-timers) must not import the server: the server depends on the library, and an application installs the library alone',
      severity: 'error',
      from: { path: '^packages/chronos-timers/' },
      to: { path: '^packages/chronos-timers-server/' },
    },
    {
      name: 'library-no-server-dependencies',
      comment:
        "the library must not use the server's dependencies (HTTP, MCP, metrics, the webhook client, the tracing SDK): they are not installed with it",
      severity: 'error',
      from: { path: LIB },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-peer', 'npm-optional', 'npm-no-pkg', 'npm-unknown'],
        path: 'node_modules/(fastify|@fastify|@modelcontextprotocol|prom-client|undici|@opentelemetry/(sdk|exporter|resources))',
      },
    },
    {
      name: 'library-pglite-only-when-used',
      comment:
        'PGlite is an optional peer dependency of the library: only the embedded store (loaded by a dynamic import when dataDir is used) may import it',
      severity: 'error',
      from: { path: LIB, pathNot: `${LIB}store/driver/(embedded|embedded-template|embedded-ahead|db)\\.ts$` },
      to: { path: 'node_modules/@electric-sql/pglite' },
    },
    {
      name: 'server-through-the-entries',
      comment:
        "the server reaches the library through 'chronos-timers' or 'chronos-timers/internal' only, never a file path into it",
      severity: 'error',
      from: { path: SRV },
      to: { path: LIB, pathNot: `${LIB}(index|internal)\\.ts$` },
    },
    {
      name: 'store-is-the-bottom',
      comment:
        'the store is the one door to SQL and imports nothing above it (core, wire, dispatch, the composition, the library API)',
      severity: 'error',
      from: { path: `${LIB}store/` },
      to: { path: `${LIB}(core/|wire/|dispatch/|tracker/|receivers/|library|core-service|index|internal)` },
    },
    {
      name: 'driver-is-the-floor',
      comment:
        "the store's driver (store/driver/: connections, the protocol, encodings, the embedded store, migrate) knows no table of Chronos and nothing above the store: the tables build on it, so it can be tested, changed or replaced under them; only the errors and the clock (leaves of the library) are shared with it",
      severity: 'error',
      from: { path: `${LIB}store/driver/` },
      to: { path: LIB, pathNot: `${LIB}(store/driver/|errors\\.ts$|clock\\.ts$)` },
    },
    {
      name: 'core-no-loops',
      comment: 'core services hold the rules for every door and never import the loops or the doors',
      severity: 'error',
      from: { path: `${LIB}core/` },
      to: { path: `${LIB}(dispatch/|tracker/|library|core-service|index|internal)` },
    },
    {
      name: 'surfaces-apart',
      comment:
        'HTTP, MCP and the CLI are thin doors over the service: none imports another door (a door shared by two belongs in core or wire)',
      severity: 'error',
      from: { path: `${SRV}(http|mcp)/` },
      to: { path: `${SRV}(http|mcp|cli)/`, pathNot: `${SRV}$1/` },
    },
    {
      name: 'surfaces-not-loops',
      comment: 'the doors never import the tracker: they reach it through the service',
      severity: 'error',
      from: { path: `${SRV}(http|mcp|cli)/` },
      to: { path: `${SRV}tracker/` },
    },
    {
      name: 'no-circular',
      comment: 'a circle of imports has no bottom to test or to change first',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.test\\.ts$' },
    tsConfig: { fileName: 'tsconfig.check.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
