import type { ConsumerConfig, ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import { IdemError } from '../core/errors.js';

/** How the source's durable pull consumer is made when it does not exist. */
export interface DurableSettings {
  stream: string;
  durable: string;
  filterSubject: string | undefined;
  /** Where a new durable starts. */
  from: 'start' | 'end';
  ackWaitMs: number;
  maxAckPending: number;
}

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: unknown; api_error?: { err_code?: number } }).api_error?.err_code;
  return (
    code === 10014 ||
    code === 10059 ||
    (err as Error).name === 'ConsumerNotFoundError' ||
    (err as Error).name === 'StreamNotFoundError'
  );
}

async function infoOrNull(jsm: JetStreamManager, s: DurableSettings): Promise<ConsumerInfo | null> {
  try {
    return await jsm.consumers.info(s.stream, s.durable);
  } catch (err) {
    if (isNotFound(err)) {
      // A missing stream is said plainly: the source never creates the stream (the relay does).
      await jsm.streams.info(s.stream).catch((e: unknown) => {
        if (isNotFound(e))
          throw new IdemError('not_found', `JetStream stream "${s.stream}" does not exist`, {
            stream: s.stream,
          });
        throw e;
      });
      return null;
    }
    throw err;
  }
}

/**
 * The durable, ready to deliver in stream order from its first unacknowledged message. Created when
 * missing (explicit acks, the filter subject). An existing one must ack explicitly and have the same
 * filter subject. When it has deliveries that nobody acknowledged (an earlier owner died, or an
 * earlier subscription of this process lost some in transit), it is made again from its
 * acknowledgement floor: those messages then come again first, in stream order, instead of after
 * `ack_wait` and behind later ones. Returns the durable's info and whether it was made again.
 */
export async function readyDurable(
  jsm: JetStreamManager,
  s: DurableSettings,
): Promise<{ info: ConsumerInfo; remade: boolean }> {
  const found = await infoOrNull(jsm, s);
  if (!found) {
    const info = await jsm.consumers.add(s.stream, {
      durable_name: s.durable,
      ack_policy: 'explicit',
      deliver_policy: s.from === 'end' ? 'new' : 'all',
      ack_wait: s.ackWaitMs * 1_000_000,
      max_ack_pending: s.maxAckPending,
      max_deliver: -1,
      ...(s.filterSubject !== undefined && { filter_subject: s.filterSubject }),
    });
    return { info, remade: false };
  }
  const c = found.config;
  if (c.ack_policy !== 'explicit')
    throw new IdemError(
      'invalid_input',
      `JetStream consumer "${s.durable}" acks "${c.ack_policy}"; jetStreamSource needs ack_policy "explicit" (give it a durable of its own)`,
      { field: 'durable', durable: s.durable },
    );
  if ((c.filter_subject || undefined) !== s.filterSubject)
    throw new IdemError(
      'invalid_input',
      `JetStream consumer "${s.durable}" filters "${c.filter_subject ?? ''}", not "${s.filterSubject ?? ''}"; a durable's filter is part of its identity: use another durable name`,
      { field: 'filterSubject', durable: s.durable },
    );
  if (found.num_ack_pending === 0) return { info: found, remade: false };
  const config: Partial<ConsumerConfig> = {
    ...c,
    deliver_policy: 'by_start_sequence',
    opt_start_seq: found.ack_floor.stream_seq + 1,
  };
  delete config.opt_start_time;
  await jsm.consumers.delete(s.stream, s.durable);
  return { info: await jsm.consumers.add(s.stream, config), remade: true };
}
