/**
 * A stand-in for something a `beforeAll` hook makes: suites can take it (or destructure it) when
 * they are declared, and use it once the hook has run. Every property read and write goes to the
 * real object; its methods stay bound to it.
 */
export function lateBound<T extends object>(what: string, current: () => T | null): T {
  const real = (): T => {
    const value = current();
    if (!value) throw new Error(`${what} is not ready yet (it is made in a beforeAll hook)`);
    return value;
  };
  return new Proxy({} as T, {
    get: (_target, property) => {
      const value = Reflect.get(real(), property) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(real()) : value;
    },
    set: (_target, property, value) => Reflect.set(real(), property, value),
  });
}
