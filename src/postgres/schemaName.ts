import { createHash } from 'node:crypto';
import { InvalidInputError } from '../core/errors.js';

/** The PostgreSQL schema the store uses when none is given. */
export const DEFAULT_SCHEMA = 'idem';

/**
 * Checks a schema name: a plain identifier (letters, digits, `_`, not starting with a digit, at most
 * 63 bytes), so it can be quoted safely into DDL and needs no escaping anywhere.
 */
export function validateSchemaName(schema: unknown, field = 'schema'): string {
  if (typeof schema !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new InvalidInputError(
      field,
      'must be an identifier of 1-63 letters, digits or _, not starting with a digit',
    );
  }
  return schema;
}

/** The quoted schema, ready to prefix table names: `"idem"`. */
export function quoteSchema(schema: string): string {
  return `"${schema}"`;
}

/**
 * The LISTEN/NOTIFY channel that carries the schema's new head positions. Channel names are limited
 * to 63 bytes: a long schema name is shortened with a hash, so two schemas never share a channel.
 */
export function appendChannel(schema: string): string {
  const channel = `idem_append_${schema}`;
  if (channel.length <= 63) return channel;
  return `idem_append_${schema.slice(0, 40)}_${createHash('sha256').update(schema).digest('hex').slice(0, 10)}`;
}

/**
 * The name of a statement prepared once per connection (no parse and plan per call). It names the
 * schema, since several stores may share one pool, and stays short (names are cut at 63 bytes).
 */
export function statementName(what: string, quotedSchema: string): string {
  return `idem_${what}_${createHash('sha256').update(quotedSchema).digest('hex').slice(0, 16)}`;
}
