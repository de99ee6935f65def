import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { headers } from '@nats-io/transport-node';
import { jetstream, type JsMsg } from '@nats-io/jetstream';
import type { RecordedEvent } from '../../src/core/event.js';
import { eventOf, readDelivery, readsHeaderBlock, type Delivery } from '../../src/nats/deliveredMessage.js';
import { eventFromMessage, writeEventHeaders } from '../../src/nats/relayMessage.js';
import { requireOrSkip } from '../support/index.js';
import { natsFixture, type NatsFixture } from './natsSupport.js';

const skip = await requireOrSkip('nats');

const event = (position: number, more: Partial<RecordedEvent> = {}): RecordedEvent => ({
  id: `00000000-0000-7000-8000-${String(position).padStart(12, '0')}`,
  stream: `invoice-é-${position}`,
  version: position,
  position,
  type: 'invoice.line',
  data: { i: position, text: 'ünïcode ✓' },
  metadata: { k: position },
  recordedAt: '2026-01-02T03:04:05.678Z',
  ...more,
});

describe(
  'a delivered JetStream message as the source reads it (nats-server at 127.0.0.1:4222)',
  { skip },
  () => {
    let nats: NatsFixture;
    before(async () => {
      nats = await natsFixture();
    });
    after(async () => {
      await nats.close();
    });

    /** Publishes each header set (with the body of `data`) and consumes them once from a new durable. */
    async function delivered(
      messages: { h: ReturnType<typeof headers> | null; data: Uint8Array; id?: string }[],
    ) {
      const stream = nats.streamName();
      await nats.jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
      const js = jetstream(nats.nc);
      for (const m of messages)
        await js.publish(`${stream}.events`, m.data, {
          ...(m.h && { headers: m.h }),
          ...(m.id !== undefined && { msgID: m.id }),
        });
      await nats.jsm.consumers.add(stream, { durable_name: 'd', ack_policy: 'explicit' });
      const consumer = await js.consumers.get(stream, 'd');
      const out: JsMsg[] = [];
      const it = await consumer.consume({ max_messages: 100 });
      for await (const m of it) {
        out.push(m);
        if (out.length === messages.length) break;
      }
      await it.close();
      return out;
    }

    it('reads the event and the delivery figures the client reads, without its header map', async () => {
      const body = (e: RecordedEvent) => new TextEncoder().encode(JSON.stringify(e.data));
      const plain = event(1);
      const spaced = headers();
      writeEventHeaders(spaced, event(2));
      spaced.set('Idem-Type', '  padded.type  ');
      spaced.set('X-Other', 'a: b');
      const twice = headers();
      writeEventHeaders(twice, event(3));
      twice.append('Idem-Position', '99');
      const noPosition = headers();
      noPosition.set('Idem-Stream', 'x');
      const msgs = await delivered([
        { h: writeEventHeaders(headers(), plain), data: body(plain), id: plain.id },
        { h: spaced, data: body(event(2)), id: event(2).id },
        { h: twice, data: body(event(3)), id: event(3).id },
        // A body with a byte order mark, which a TextDecoder drops.
        {
          h: writeEventHeaders(headers(), event(4)),
          data: Uint8Array.of(0xef, 0xbb, 0xbf, ...body(event(4))),
          id: event(4).id,
        },
        { h: noPosition, data: new TextEncoder().encode('{}') },
        { h: null, data: new TextEncoder().encode('{}') },
      ]);
      // The client's message objects show the header block as it arrived (the source reads it there).
      assert.deepEqual(
        msgs.map((m) => readsHeaderBlock(m)),
        [true, true, true, true, true, false],
      );
      const events = msgs.map((m) => eventOf(m));
      // As the client's decoded headers give them (the first value of a name, trimmed).
      assert.deepEqual(
        events,
        msgs.map((m) => eventFromMessage(m.headers, m.data)),
      );
      assert.deepEqual(
        events.map((e) => e?.position ?? null),
        [1, 2, 3, 4, null, null],
      );
      assert.equal(events[1]!.type, 'padded.type');
      assert.deepEqual(events[0], plain);
      for (const m of msgs) {
        const d: Delivery = { count: 0, sequence: 0, pending: -1 };
        assert.equal(readDelivery((m as JsMsg & { reply: string }).reply, d), true);
        assert.deepEqual(d, {
          count: m.info.deliveryCount,
          sequence: m.info.deliverySequence,
          pending: m.info.pending,
        });
      }
    });

    it('reads reply subjects of both of JetStream’s shapes, and refuses other subjects', () => {
      const d: Delivery = { count: 0, sequence: 0, pending: 0 };
      assert.equal(readDelivery('$JS.ACK.ORDERS.d.2.17.5.1733300000000000000.40', d), true);
      assert.deepEqual(d, { count: 2, sequence: 5, pending: 40 });
      assert.equal(readDelivery('$JS.ACK._.ABC.ORDERS.d.1.18.6.1733300000000000000.0.xYz', d), true);
      assert.deepEqual(d, { count: 1, sequence: 6, pending: 0 });
      assert.equal(readDelivery('$JS.ACK.hub.ABC.ORDERS.d.3.19.7.1733300000000000000.12', d), true);
      assert.deepEqual(d, { count: 3, sequence: 7, pending: 12 });
      for (const s of [
        '_INBOX.abc',
        '$JS.ACK.ORDERS.d.1.2',
        '$JS.ACK.ORDERS.d.x.17.5.1.40',
        '$JS.ACK.A.d.1.2.3.4.5.6',
      ])
        assert.equal(readDelivery(s, d), false, s);
    });
  },
);
