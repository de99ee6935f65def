import type { JsMsg } from '@nats-io/jetstream';
import type { RecordedEvent } from '../core/event.js';
import { eventFromHeaderText, eventFromMessage } from './relayMessage.js';

const decoder = new TextDecoder();

/** What the source reads of a message's delivery: JetStream says it in the reply subject. */
export interface Delivery {
  count: number;
  sequence: number;
  pending: number;
}

/**
 * The delivery figures of `JsMsg.info` read from the reply subject without splitting it:
 * `$JS.ACK.<stream>.<consumer>.<count>.<stream seq>.<delivery seq>.<time>.<pending>`, or with
 * `<domain>.<account hash>` before the stream and tokens after the pending count. False when the
 * subject is not of that shape (the caller asks the client then).
 */
export function readDelivery(reply: string, into: Delivery): boolean {
  if (!reply.startsWith('$JS.ACK.')) return false;
  let tokens = 1;
  for (let i = 0; i < reply.length; i++) if (reply.charCodeAt(i) === 46) tokens++;
  if (tokens !== 9 && tokens < 11) return false;
  // The token index of the delivery count.
  const first = tokens === 9 ? 4 : 6;
  let at = 0;
  for (let t = 0; t < first; t++) at = reply.indexOf('.', at) + 1;
  for (let t = 0; t < 5; t++) {
    if (t === 3) {
      // The time in nanoseconds: more than a safe integer, and not needed.
      at = reply.indexOf('.', at) + 1;
      continue;
    }
    let n = 0;
    let digits = 0;
    for (; at < reply.length; at++, digits++) {
      const c = reply.charCodeAt(at) - 48;
      if (c < 0 || c > 9) break;
      n = n * 10 + c;
    }
    if (digits === 0 || !Number.isSafeInteger(n)) return false;
    if (t === 0) into.count = n;
    else if (t === 2) into.sequence = n;
    else if (t === 4) into.pending = n;
    at++;
  }
  return true;
}

/** The message's header block and body as they arrived, when the client's message object shows them. */
function rawParts(msg: JsMsg): { data: Uint8Array; hdr: number } | null {
  const m = (msg as JsMsg & { msg?: { _rdata?: unknown; _msg?: { hdr?: unknown } } }).msg;
  const data = m?._rdata;
  const hdr = m?._msg?.hdr;
  return data instanceof Uint8Array && typeof hdr === 'number' && hdr >= 0 && hdr <= data.length
    ? { data, hdr }
    : null;
}

/** Whether `eventOf` reads the message's header block itself (else the client decodes the headers). */
export function readsHeaderBlock(msg: JsMsg): boolean {
  return rawParts(msg) !== null;
}

/**
 * The idem event a delivered message carries, or null for another message. Read from the header
 * block as it arrived when the client's message object shows it (without the client's header map),
 * else from the headers the client decodes.
 */
export function eventOf(msg: JsMsg): RecordedEvent | null {
  try {
    const raw = rawParts(msg);
    if (!raw) return eventFromMessage(msg.headers, msg.data);
    const { data, hdr } = raw;
    if (!Buffer.isBuffer(data))
      return eventFromHeaderText(decoder.decode(data.subarray(0, hdr)), data.subarray(hdr));
    // Node's own decoding of a range, without a view of it (a TextDecoder drops a byte order mark).
    const body = data.toString('utf8', hdr);
    return eventFromHeaderText(
      data.toString('utf8', 0, hdr),
      body.charCodeAt(0) === 0xfeff ? body.slice(1) : body,
    );
  } catch {
    return null;
  }
}
