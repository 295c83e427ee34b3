/**
 * Who is asking: `Authorization: Bearer <api key>` names one owner; the operator token
 * (`CHRONOS_OPERATOR_TOKEN`) acts for the owner named by `X-Chronos-Owner`. An owner's key with
 * `X-Chronos-Owner` naming anyone else is refused (403). Where the door allows it (the lists and
 * figures the dashboard reads across owners), the operator token without `X-Chronos-Owner`
 * acts for every owner at once: a caller whose `owner` is null.
 *
 * Neither the key nor the token ever appears in an answer or a log line: refusals say what was
 * wrong with the header, not what it held.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { ChronosError, invalidInput } from '../errors.js';
import type { KeyService } from './key-service.js';
import { parseOwner, type Owner } from './owner.js';

export const OWNER_HEADER = 'x-chronos-owner';

export interface Caller {
  owner: Owner;
  /** `key_…` for an owner's key; `operator` for the operator token. */
  via: string;
}

/** The operator token with no `X-Chronos-Owner`, where every owner may be read at once. */
export interface EveryOwnerCaller {
  owner: null;
  via: 'operator';
}

const BEARER = /^Bearer +([^\s]+) *$/i;

const digest = (value: string) => createHash('sha256').update(value).digest();

export class Authenticator {
  readonly #operatorDigest: Buffer | null;

  /**
   * `storeHint` follows the refusal of an unknown key: which store this server uses (keys belong
   * to one; see store-name.ts).
   */
  constructor(
    private readonly keys: KeyService,
    operatorToken: string | undefined,
    private readonly storeHint?: string,
  ) {
    this.#operatorDigest = operatorToken ? digest(operatorToken) : null;
  }

  /**
   * The caller of a request, from its headers; throws 401, 403 or 400 (malformed owner, or the
   * operator token naming no owner unless `everyOwner` allows it).
   */
  async authenticate(headers: Record<string, string | string[] | undefined>): Promise<Caller>;
  async authenticate(
    headers: Record<string, string | string[] | undefined>,
    options: { everyOwner: boolean },
  ): Promise<Caller | EveryOwnerCaller>;
  async authenticate(
    headers: Record<string, string | string[] | undefined>,
    options: { everyOwner: boolean } = { everyOwner: false },
  ): Promise<Caller | EveryOwnerCaller> {
    const authorization = single(headers.authorization, 'Authorization');
    if (authorization === undefined) {
      throw new ChronosError(
        'unauthorized',
        'Authorization: expected "Bearer <api key>", got nothing; create a key with `chronos keys create --owner <did>`',
      );
    }
    const match = BEARER.exec(authorization);
    if (!match) {
      throw new ChronosError(
        'unauthorized',
        'Authorization: expected "Bearer <api key>", got a header of another form',
      );
    }
    const token = match[1]!;
    const named = single(headers[OWNER_HEADER], 'X-Chronos-Owner');

    if (this.#isOperator(token)) {
      if (named === undefined) {
        if (options.everyOwner) return { owner: null, via: 'operator' };
        throw invalidInput(
          'X-Chronos-Owner',
          'the DID of the owner the operator token acts for, e.g. "did:matrix:<user uuid>:<key fingerprint>"',
          undefined,
        );
      }
      return { owner: parseOwner(named, 'X-Chronos-Owner'), via: 'operator' };
    }

    const key = await this.keys.authenticate(token);
    if (!key) {
      throw new ChronosError(
        'unauthorized',
        'Authorization: the API key is unknown or revoked; create one with `chronos keys create --owner <did>`' +
          (this.storeHint ? ` (${this.storeHint})` : ''),
      );
    }
    if (named !== undefined && parseOwner(named, 'X-Chronos-Owner').did !== key.owner.did) {
      throw new ChronosError(
        'forbidden',
        'X-Chronos-Owner: an owner’s API key acts only for its own owner; drop the header, or use that owner’s key',
      );
    }
    return { owner: key.owner, via: key.keyId };
  }

  #isOperator(token: string): boolean {
    // Compared as digests, in constant time, so neither the length nor a prefix leaks.
    return this.#operatorDigest !== null && timingSafeEqual(digest(token), this.#operatorDigest);
  }
}

function single(value: string | string[] | undefined, name: string): string | undefined {
  if (Array.isArray(value)) {
    if (value.length > 1) throw invalidInput(name, 'one header', `${value.length} headers`);
    return value[0];
  }
  return value;
}
