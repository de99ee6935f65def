import { createHash } from 'node:crypto';

/** The UUID namespace of idem's command event ids (fixed: changing it would change every derived id). */
export const COMMAND_EVENT_NAMESPACE = 'eb51b4ab-ad5e-45ec-a959-9c5a493c4aca';

/**
 * The id of the `index`-th event (0-based) a command appends: the UUIDv5 of the name
 * `<index>:<commandId>` in `COMMAND_EVENT_NAMESPACE`. The index comes first and holds no `:`, so two
 * different (command id, index) pairs never share a name. The same command decided again appends the
 * same ids, which the store recognises as a duplicate and writes once.
 */
export function commandEventId(commandId: string, index: number): string {
  return uuidv5(COMMAND_EVENT_NAMESPACE, `${index}:${commandId}`);
}

/** RFC 9562 UUIDv5: SHA-1 of the namespace's 16 bytes and the UTF-8 name, with version and variant set. */
export function uuidv5(namespace: string, name: string): string {
  const hash = createHash('sha1')
    .update(Buffer.from(namespace.replaceAll('-', ''), 'hex'))
    .update(name, 'utf8')
    .digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.toString('hex', 0, 16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
