// A module resolution hook for running the server from a checkout's sources (bin/chronos.js):
// `chronos-timers` and `chronos-timers/internal` are the library's TypeScript sources beside this
// package, not its build, so an edit to the library is seen without a build.
const LIBRARY = new URL('../../chronos-timers/src/', import.meta.url);
const ENTRIES = { 'chronos-timers': 'index.ts', 'chronos-timers/internal': 'internal.ts' };

export async function resolve(specifier, context, next) {
  const entry = ENTRIES[specifier];
  if (entry) return { url: new URL(entry, LIBRARY).href, shortCircuit: true };
  return next(specifier, context);
}
