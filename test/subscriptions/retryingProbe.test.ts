// The shared safety-net check for retrying dead letters: one probe answers every open consumer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import { RetryingProbe } from '../../src/subscriptions/retryingProbe.js';
import type { SubscriptionStateBackend } from '../../src/subscriptions/stateBackend.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { onEveryStore } from '../support/everyStore.js';

const pg = await pgTestContext();

/** The backend's probe names exactly the consumers with a `retrying` dead letter. */
async function probeContract(store: EventStore): Promise<void> {
  // The store's own state backend, as its subscription service asks it.
  const backend = (store as unknown as { subscriptions: { backend: SubscriptionStateBackend } }).subscriptions
    .backend;
  assert.equal(
    typeof backend.retryingConsumers,
    'function',
    'the backend answers for many consumers at once',
  );
  await store.append('invoice-1', [{ type: 't', data: null }]);
  for (const name of ['parked_v1', 'retried_v1', 'clean_v1']) {
    const sub = await store.subscribe(name);
    const it = sub[Symbol.asyncIterator]();
    const first = await it.next();
    assert.ok(!first.done && first.value.kind === 'events');
    if (name !== 'clean_v1') await sub.park(1, { reason: 'poison' });
    else await sub.ack(1);
    await sub.close();
  }
  assert.deepEqual(
    await backend.retryingConsumers!(['parked_v1', 'retried_v1', 'clean_v1', 'unknown_v1']),
    [],
  );
  await store.deadLetters.retry('retried_v1', { stream: 'invoice-1' });
  assert.deepEqual(await backend.retryingConsumers!(['parked_v1', 'retried_v1', 'clean_v1', 'unknown_v1']), [
    'retried_v1',
  ]);
  assert.deepEqual(await backend.retryingConsumers!(['parked_v1']), []);
}

onEveryStore(pg, 'retryingConsumers (the state backends)', probeContract);

describe('RetryingProbe', () => {
  it('asks once for every open consumer, and answers each from that', async () => {
    const open = Array.from({ length: 100 }, (_, i) => `c${i}`);
    const probes: string[][] = [];
    const probe = new RetryingProbe(
      (names) => {
        probes.push([...names]);
        return Promise.resolve(names.filter((n) => n === 'c7' || n === 'c42'));
      },
      () => open,
      60_000,
    );
    const answers = await Promise.all(open.map((c) => probe.mayHave(c)));
    assert.equal(probes.length, 1);
    assert.deepEqual(probes[0], open);
    assert.deepEqual(
      open.filter((_, i) => answers[i]),
      ['c7', 'c42'],
    );
    // Later questions within the answer's age: no new probe.
    assert.equal(await probe.mayHave('c7'), true);
    assert.equal(await probe.mayHave('c8'), false);
    assert.equal(probes.length, 1);
  });

  it('says "may have" for a consumer the probe did not ask about, and asks again once the answer is old', async () => {
    let open = ['a'];
    let probes = 0;
    const probe = new RetryingProbe(
      () => {
        probes++;
        return Promise.resolve([]);
      },
      () => open,
      0,
    );
    assert.equal(await probe.mayHave('a'), false);
    open = ['a', 'b'];
    // The answer is too old for maxAgeMs 0 (or the clock moved): a new probe, which asks about b too.
    await new Promise((resolve) => setTimeout(resolve, 2));
    assert.equal(await probe.mayHave('b'), false);
    assert.equal(probes, 2);
    // A consumer opened after the probe it joined started: it must look for itself.
    let release!: (names: string[]) => void;
    const slow = new RetryingProbe(
      () => new Promise<string[]>((resolve) => (release = resolve)),
      () => open,
      60_000,
    );
    const first = slow.mayHave('a');
    open = ['a', 'b', 'late'];
    const late = slow.mayHave('late');
    release([]);
    assert.equal(await first, false);
    assert.equal(await late, true);
  });
});
