import type { JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { RELAY_HEADERS, eventFromMessage } from './relayMessage.js';

/** How the relay creates its JetStream stream when it does not exist. */
export interface RelayStreamCreation {
  /** @default 'file' */
  storage?: 'file' | 'memory';
  /** Copies of each message in a cluster. @default 1 */
  replicas?: number;
  /** JetStream's de-duplication window. The relay does not depend on it. @default JetStream's (2 minutes) */
  duplicateWindowMs?: number;
}

const STREAM_NAME = /^[^\s.*>/\\]+$/;
const SUBJECT_TOKEN = /^[^\s*>]+$/;

export function validateJetStreamName(name: unknown, field: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 255 || !STREAM_NAME.test(name))
    throw new InvalidInputError(
      field,
      'must be a JetStream stream name: 1-255 characters, no whitespace, ".", "*", ">", "/" or "\\"',
    );
  return name;
}

export function validateSubject(subject: unknown, field: string): string {
  if (typeof subject !== 'string' || subject.length === 0 || subject.length > 1024)
    throw new InvalidInputError(field, 'must be a NATS subject of 1-1024 characters');
  if (!subject.split('.').every((t) => t.length > 0 && SUBJECT_TOKEN.test(t)))
    throw new InvalidInputError(
      field,
      'must be a NATS subject: tokens separated by ".", none empty, no whitespace or wildcards',
    );
  return subject;
}

/** True when a stream subject (possibly with `*` and `>` wildcards) covers `subject`. */
export function subjectCovers(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

function isStreamNotFound(err: unknown): boolean {
  return (err as { code?: unknown }).code === 10059 || (err as Error).name === 'StreamNotFoundError';
}

/**
 * The relay's JetStream stream: checked when it exists (one of its subjects must cover the relay's
 * subject), created when it does not and `create` is given, otherwise `not_found`.
 */
export async function ensureRelayStream(
  jsm: JetStreamManager,
  name: string,
  subject: string,
  create: RelayStreamCreation | undefined,
): Promise<StreamInfo> {
  let info: StreamInfo;
  try {
    info = await jsm.streams.info(name);
  } catch (err) {
    if (!isStreamNotFound(err)) throw err;
    if (!create)
      throw new IdemError(
        'not_found',
        `JetStream stream "${name}" does not exist; create it, or let the relay create it (create option, idem relay --create)`,
        { stream: name },
      );
    return jsm.streams.add({
      name,
      subjects: [subject],
      storage: create.storage ?? 'file',
      num_replicas: create.replicas ?? 1,
      ...(create.duplicateWindowMs !== undefined && {
        duplicate_window: create.duplicateWindowMs * 1_000_000,
      }),
    });
  }
  const subjects = info.config.subjects ?? [];
  if (!subjects.some((p) => subjectCovers(p, subject)))
    throw new IdemError(
      'invalid_input',
      `JetStream stream "${name}" does not take subject "${subject}" (its subjects: ${subjects.join(', ') || 'none'})`,
      { field: 'subject', stream: name, subjects },
    );
  return info;
}

/** The last event the relay published into the stream, or null when the stream holds none. */
export interface LastRelayed {
  position: number;
  id: string;
}

/**
 * Reads the stream's last message. It must be one the relay published (it carries `Idem-Position`):
 * the relay chains its publishes on the last message id, so a stream that another publisher writes
 * to cannot be relayed into, and that is said plainly rather than found out publish by publish.
 */
export async function lastRelayed(jsm: JetStreamManager, name: string): Promise<LastRelayed | null> {
  const info = await jsm.streams.info(name);
  if (info.state.messages === 0) return null;
  const msg = await jsm.streams.getMessage(name, { seq: info.state.last_seq });
  const event = msg ? eventFromMessage(msg.header, msg.data) : null;
  if (!msg) return null;
  if (!event)
    throw new IdemError(
      'invalid_input',
      `JetStream stream "${name}": its last message (sequence ${info.state.last_seq}) has no ${RELAY_HEADERS.position} header, so another publisher writes to it; give the relay a stream of its own`,
      { field: 'stream', stream: name, sequence: info.state.last_seq },
    );
  return { position: event.position, id: event.id };
}
