/**
 * The "storable text" rule, once: text Chronos keeps must come back exactly as it was given
 * (I4). PostgreSQL `text` cannot hold NUL, and an unpaired surrogate cannot be stored as UTF-8:
 * both would come back changed, so they are refused rather than altered. Lengths are counted in
 * code points (what a person counts as characters), sizes in UTF-8 bytes.
 */

export const STORABLE_EXPECTED = 'text without NUL characters or unpaired surrogates';

export function isStorable(text: string): boolean {
  return text.isWellFormed() && !text.includes('\u0000');
}

/** Characters as a person counts them (code points, not UTF-16 units). */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** How a too-long text is shown in a refusal: `201 characters (201 bytes)`. */
export function describeLength(text: string): string {
  return `${codePoints(text)} characters (${Buffer.byteLength(text)} bytes)`;
}
