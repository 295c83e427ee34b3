/**
 * The JSON wire form of the wake routes' bodies (contract §5, §7): the acknowledgement
 * `{note}` and the router's reply report `{}`, read with the same form reader as every body and
 * published in OpenAPI from the same schemas.
 */
import { z } from 'zod';
import { NOTE_EXPECTED, NOTE_MAX_CHARS } from '../core/wake-service.js';
import { readForm, readNoFields, type Form } from './fields.js';

/** The body of `POST /v1/wakes/{id}/ack`. */
export const ackWakeSchema = z.strictObject({
  note: z
    .string()
    .describe(
      `What was done about the wake, in a few words (1 to ${NOTE_MAX_CHARS} characters), e.g. "build checked, all green".`,
    ),
});

/** The body of `POST /v1/conversations/{conversation_id}/replies`: nothing yet. */
export const replySchema = z.strictObject({});

const ackForm: Form<'note'> = {
  names: { note: 'note' },
  rules: { note: { schema: z.string(), expected: NOTE_EXPECTED } },
  aliases: { text: 'note', message: 'note', comment: 'note' },
};

/** The note of an ack body (its meaning — not empty — is the wake service's to check). */
export function readAckBody(body: unknown): string {
  return readForm(body, ackForm, { required: ['note'] }).note as string;
}

/** A reply report's body: absent, or `{}`. */
export const readReplyBody = readNoFields;
