/**
 * Owners are agents named by a DID of the form `did:matrix:<user_id>:<keyfp>`: `user_id` (a UUID)
 * is whom the router delivers a wake to, `keyfp` (1–128 of `[A-Za-z0-9._-]`) tells the owner's
 * keys apart. Every query is scoped to one owner.
 */
import { invalidInput } from '../errors.js';

export interface Owner {
  did: string;
  userId: string;
}

const DID =
  /^did:matrix:([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}):([A-Za-z0-9._-]{1,128})$/;

/** The library's owner when the caller names none. */
export const LIBRARY_OWNER = 'did:matrix:00000000-0000-0000-0000-000000000000:lib';

export const OWNER_EXPECTED =
  'a DID like "did:matrix:<user uuid>:<key fingerprint>", e.g. "did:matrix:6f1c2a9e-8b1d-4f7a-9a51-0c3e5d7b2f10:laptop"';

export function parseOwner(did: unknown, path = 'owner'): Owner {
  const match = typeof did === 'string' ? DID.exec(did) : null;
  if (!match) throw invalidInput(path, OWNER_EXPECTED, did);
  return { did: did as string, userId: match[1]!.toLowerCase() };
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** An id as a refusal shows it: quoted when it is a UUID; otherwise not echoed (it may be a credential pasted by mistake). */
export function idInMessage(id: string): string {
  return isUuid(id) ? JSON.stringify(id) : '(an id that is not a UUID)';
}
