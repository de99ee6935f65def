// A consumer group member's heartbeat: joining while other members sweep out the records of members
// whose heartbeat ran out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { memberRecordName } from '../../src/core/consumerGroups.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { MemorySubscriptionState } from '../../src/memory/subscriptionState.js';
import type { AcquireResult } from '../../src/subscriptions/stateBackend.js';
import { SubscriptionService } from '../../src/subscriptions/subscriptionService.js';

/** Deletes a member's record between its registration and its lease, `sweeps` times: another member's sweep. */
class SweptState extends MemorySubscriptionState {
  acquires = 0;
  constructor(
    private readonly record: string,
    private sweeps: number,
  ) {
    super();
  }
  override async acquire(name: string, owner: string, ttlMs: number): Promise<AcquireResult> {
    if (name === this.record) {
      this.acquires++;
      if (this.sweeps > 0) {
        this.sweeps--;
        assert.equal((await this.delete(name)).ok, true, 'a record without a lease is swept');
      }
    }
    return super.acquire(name, owner, ttlMs);
  }
}

describe('consumer group member heartbeat', () => {
  it('joins although another member swept its new record before it took the lease', async () => {
    const store = createMemoryStore();
    const state = new SweptState(memberRecordName('billing', 'm-1'), 2);
    const service = new SubscriptionService(store, state);
    try {
      const members = await service.consumers.heartbeatMember!('billing', 'm-1', 1_000);
      assert.deepEqual(
        members.map((m) => m.member),
        ['m-1'],
      );
      assert.equal(state.acquires, 3, 'registered and leased again after each sweep');
      const again = await service.consumers.heartbeatMember!('billing', 'm-1', 1_000);
      assert.deepEqual(
        again.map((m) => m.member),
        ['m-1'],
      );
      assert.ok(Date.parse(again[0]!.leaseExpiresAt ?? '') > 0, 'with when its heartbeat runs out');
      assert.equal(state.acquires, 3, 'a live member renews its lease');
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('gives up with not_found when every try is swept', async () => {
    const store = createMemoryStore();
    const service = new SubscriptionService(store, new SweptState(memberRecordName('billing', 'm-1'), 100));
    try {
      await assert.rejects(service.consumers.heartbeatMember!('billing', 'm-1', 1_000), {
        code: 'not_found',
      });
    } finally {
      await service.close();
      await store.close();
    }
  });
});
