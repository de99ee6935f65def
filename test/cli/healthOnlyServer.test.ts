import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startHealthOnlyServer } from '../../src/cli/healthOnlyServer.js';
import { createMemoryStore } from '../../src/index.js';

describe('the health-only stand-in for builds without src/server', () => {
  it('answers GET /health with the head position and 404 elsewhere; refuses a non-loopback host', async () => {
    const store = createMemoryStore();
    try {
      await store.append('a-1', [{ type: 't', data: 1 }]);
      await assert.rejects(startHealthOnlyServer(store, '0.0.0.0', 0), /only a loopback --host/);
      const server = await startHealthOnlyServer(store, '127.0.0.1', 0);
      try {
        const health = await fetch(`${server.url}/health`);
        assert.equal(health.status, 200);
        assert.deepEqual(await health.json(), { status: 'ok', head: 1, server: 'health-only' });
        const other = await fetch(`${server.url}/v1/events`);
        assert.equal(other.status, 404);
        assert.match(((await other.json()) as { error: { message: string } }).error.message, /not built yet/);
      } finally {
        await server.close();
      }
    } finally {
      await store.close();
    }
  });
});
