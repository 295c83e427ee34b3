/**
 * Which store a server uses, in words, for the refusal of an API key it does not know: keys
 * belong to one store, and a key made against the embedded store is unknown to a PostgreSQL
 * server (and the other way round). No secret: the URL's password is never read.
 */
import { describeHost, parseConnectionString } from '../store/driver/connection-string.js';

export interface StoreConfig {
  databaseUrl: string | undefined;
  dataDir: string;
  schema: string;
}

/**
 * `PostgreSQL at db.example:5432/app, schema chronos` or `the embedded store at ./.chronos`;
 * without `withAddress` (an answer to an unauthenticated HTTP caller), no host or path.
 */
export function storeName(config: StoreConfig, withAddress: boolean): string {
  if (config.databaseUrl === undefined) {
    return withAddress ? `the embedded store at ${config.dataDir}` : 'its embedded store';
  }
  if (!withAddress) return `PostgreSQL (schema ${config.schema})`;
  try {
    const target = parseConnectionString(config.databaseUrl, 'DATABASE_URL');
    const hosts = target.hosts.map(describeHost).join(',');
    return `PostgreSQL at ${hosts}${target.database ? `/${target.database}` : ''}, schema ${config.schema}`;
  } catch {
    return `PostgreSQL (schema ${config.schema})`;
  }
}

/** The hint that follows "the API key is unknown or revoked". */
export function keyStoreHint(config: StoreConfig, withAddress: boolean): string {
  return `keys belong to the store they were created in, and this server uses ${storeName(config, withAddress)}`;
}
