import { describe, expect, it } from 'vitest';
import { keyStoreHint, storeName } from './store-name.js';

describe('storeName', () => {
  const pg = {
    databaseUrl: 'postgres://chronos:s3cret@db.example:5433/app',
    dataDir: './.chronos',
    schema: 'chronos',
  };
  const embedded = { databaseUrl: undefined, dataDir: './.chronos', schema: 'chronos' };

  it('names PostgreSQL by host:port/db and schema, never the password', () => {
    expect(storeName(pg, true)).toBe('PostgreSQL at db.example:5433/app, schema chronos');
    expect(keyStoreHint(pg, true)).not.toContain('s3cret');
  });

  it('names the embedded store by its folder', () => {
    expect(storeName(embedded, true)).toBe('the embedded store at ./.chronos');
  });

  it('gives no address when told not to (an unauthenticated HTTP caller)', () => {
    expect(storeName(pg, false)).toBe('PostgreSQL (schema chronos)');
    expect(storeName(embedded, false)).toBe('its embedded store');
  });
});
