/**
 * Reading a caller's object into typed fields, once for every door: the object check, the
 * refusal of unknown fields (with a "did you mean"), required fields, "exactly one of", and each
 * field's own rule — every refusal named as the caller wrote the field (`in_seconds` over HTTP,
 * `inSeconds` from the library, `alarms.3.cron` in a batch) and shaped
 * `path: expected X, got Y`. Nothing is returned unless every field is right.
 */
import type { z } from 'zod';
import { describeValue, invalidFields, oneOfMessage, type FieldError } from '../errors.js';
import { describeLength, STORABLE_EXPECTED } from '../core/text.js';

export interface FieldRule {
  schema: z.ZodType;
  expected: string;
  /**
   * A quick yes: a value this plain predicate accepts is taken as it is, without parsing
   * `schema` (which must accept it too); one it does not is parsed, and the schema says why. For
   * fields read once per timer of a large batch, where a parse's work and allocations counted.
   */
  accepts?: (value: unknown) => boolean;
}

/** A door's form of an object: the caller's name and the rule of each field, by field. */
export interface Form<K extends string> {
  names: Readonly<Record<K, string>>;
  rules: Readonly<Record<K, FieldRule>>;
  /** Other words callers use for a field (`tz` for timezone), by normalised word, for suggestions. */
  aliases?: Readonly<Record<string, string>>;
}

export interface ReadOptions<K extends string> {
  /** Where the object is, as the caller sees it: `""` for a request body, `specs.3`, `alarms.3`. */
  path?: string;
  /** What the object is called when it is not an object at all (`body`, `spec`). */
  noun?: string;
  required?: readonly NoInfer<K>[];
  /** Fields of which a call gives exactly one (`exactly`) or at most one. */
  oneOf?: { fields: readonly NoInfer<K>[]; exactly: boolean };
}

/** The fields of `input` by field, each checked by its rule; throws `invalid_input` naming every bad one. */
export function readForm<K extends string>(
  input: unknown,
  form: Form<K>,
  options: ReadOptions<K> = {},
): Partial<Record<K, unknown>> {
  const errors = formErrors(input, form, options);
  if (errors.errors.length > 0) throw invalidFields(errors.errors);
  return errors.values;
}

/** As `readForm`, collecting the refusals instead of throwing (for batches). */
export function formErrors<K extends string>(
  input: unknown,
  form: Form<K>,
  options: ReadOptions<K> = {},
): { values: Partial<Record<K, unknown>>; errors: FieldError[] } {
  // Paths are spelt only for a refusal: a batch reads 50,000 objects that have none. Every
  // refusal is spelt by a function of its own, so this one, read for each of them, stays small
  // and keeps its variables off the heap (a closure here would capture them for every call).
  const path = options.path;
  const values: Partial<Record<K, unknown>> = {};
  if (typeof input !== 'object' || input === null || Array.isArray(input) || input instanceof Date) {
    return { values, errors: [notAnObject(input, options)] };
  }
  const { byName } = indexOf(form);
  const errors: FieldError[] = [];
  // Own enumerable keys, as Object.entries gives them, without an array per object (a batch
  // reads 50,000 of them).
  for (const name in input) {
    if (!Object.hasOwn(input, name)) continue;
    const value = (input as Record<string, unknown>)[name];
    const entry = byName.get(name);
    if (entry === undefined) {
      if (value !== undefined) errors.push(unknownField(form, path, name));
      continue;
    }
    if (value === undefined) continue;
    const { field, rule } = entry;
    if (rule.accepts?.(value)) {
      values[field] = value;
      continue;
    }
    const parsed = rule.schema.safeParse(value);
    if (parsed.success) values[field] = parsed.data;
    else errors.push(badValue(rule, value, parsed.error.issues, fieldPath(path, name)));
  }
  const required = options.required;
  if (required) {
    for (let i = 0; i < required.length; i++) {
      const field = required[i]!;
      if (values[field] === undefined) missing(form, field, path, errors);
    }
  }
  const oneOf = options.oneOf;
  if (oneOf && errors.length === 0) {
    let count = 0;
    for (let i = 0; i < oneOf.fields.length; i++) if (values[oneOf.fields[i]!] !== undefined) count++;
    if (count > 1 || (oneOf.exactly && count === 0)) errors.push(notOneOf(form, values, options));
  }
  return { values, errors };
}

function notAnObject(input: unknown, options: ReadOptions<string>): FieldError {
  const whole = options.path || '';
  const message = `${whole || options.noun || 'body'}: expected ${options.noun === 'spec' ? 'an object' : 'a JSON object'}, got ${describeValue(input)}`;
  return { path: whole, message };
}

function unknownField<K extends string>(form: Form<K>, path: string | undefined, name: string): FieldError {
  const names = indexOf(form).fields.map((f) => form.names[f]);
  const at = fieldPath(path, name);
  return {
    path: at,
    message: `${at}: unknown field; ${names.length > 0 ? `send only ${names.join(', ')}` : 'send an empty object {}'}${didYouMean(name, form)}`,
  };
}

function badValue(
  rule: FieldRule,
  value: unknown,
  issues: readonly z.core.$ZodIssue[],
  at: string,
): FieldError {
  const storable = issues.some((i) => i.code === 'custom' && i.message === 'storable');
  const tooLong =
    typeof value === 'string' && issues.some((i) => i.message === 'too long' || i.code === 'too_big');
  const expected = storable ? STORABLE_EXPECTED : rule.expected;
  const got = tooLong ? describeLength(value as string) : describeValue(value);
  return { path: at, message: `${at}: expected ${expected}, got ${got}` };
}

/** A required field not given, unless the caller's value for it was refused already. */
function missing<K extends string>(
  form: Form<K>,
  field: K,
  path: string | undefined,
  errors: FieldError[],
): void {
  const at = fieldPath(path, form.names[field]);
  if (!errors.some((e) => e.path === at)) {
    errors.push({ path: at, message: `${at}: expected ${form.rules[field].expected}, got nothing` });
  }
}

function notOneOf<K extends string>(
  form: Form<K>,
  values: Partial<Record<K, unknown>>,
  options: ReadOptions<K>,
): FieldError {
  const { fields, exactly } = options.oneOf!;
  const whole = options.path || '';
  const message = oneOfMessage(
    whole || options.noun || 'body',
    fields.map((f) => form.names[f]),
    fields.filter((f) => values[f] !== undefined).map((f) => form.names[f]),
    exactly,
  );
  return { path: whole, message };
}

/** `name` under `path` (`specs.3` + `at` → `specs.3.at`). */
const fieldPath = (path: string | undefined, name: string) => (path ? `${path}.${name}` : name);

/**
 * A form's fields, and the field and rule of each caller's name: made once per form, not per object
 * read. One lookup a field read, by name: looking the rule up again by field (a property read by a
 * key the code cannot foresee) weighed on a cold batch's reading of its timers (bench/README.md,
 * "Bulk scheduling").
 */
interface FormIndex<K extends string> {
  fields: K[];
  byName: Map<string, { field: K; rule: FieldRule }>;
}
const indexes = new WeakMap<object, FormIndex<string>>();
function indexOf<K extends string>(form: Form<K>): FormIndex<K> {
  let index = indexes.get(form) as FormIndex<K> | undefined;
  if (!index) {
    const fields = Object.keys(form.names) as K[];
    index = {
      fields,
      byName: new Map(fields.map((field) => [form.names[field], { field, rule: form.rules[field] }])),
    };
    indexes.set(form, index as FormIndex<string>);
  }
  return index;
}

/** `; did you mean "x"?` for a field name that is close to one of the form's, or `''`. */
export function didYouMean<K extends string>(name: string, form: Form<K>): string {
  const fields = Object.keys(form.names) as K[];
  const normal = normalise(name);
  const exact = fields.find((f) => normalise(form.names[f]) === normal);
  const alias = form.aliases?.[normal];
  let guess = exact ?? (alias !== undefined && alias in form.names ? (alias as K) : undefined);
  if (guess === undefined && normal.length >= 3) {
    let best = Infinity;
    for (const f of fields) {
      const d = distance(normal, normalise(form.names[f]));
      if (d < best && d <= (normal.length >= 6 ? 2 : 1)) {
        best = d;
        guess = f;
      }
    }
  }
  return guess === undefined ? '' : `; did you mean "${form.names[guess]}"?`;
}

const normalise = (name: string) => name.toLowerCase().replace(/[-_\s]/g, '');

/** Edit distance with transpositions (Damerau–Levenshtein, optimal string alignment). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** A form's names the other way round: the field each caller's name stands for. */
export function fieldOf<K extends string>(form: Form<K>, name: string): K | undefined {
  return (Object.keys(form.names) as K[]).find((f) => form.names[f] === name);
}

const NO_FIELDS: Form<never> = { names: {}, rules: {} };

/** A body that carries nothing: absent, or `{}` (any field is refused, by name). */
export function readNoFields(body: unknown): void {
  if (body === undefined || body === null) return;
  readForm(body, NO_FIELDS);
}
