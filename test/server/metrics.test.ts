// /metrics: the server's own figures plus registries handed in (consumers running in the same process).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Registry } from 'prom-client';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { createServer } from '../../src/server/createServer.js';

describe('/metrics', () => {
  it('includes extra registries and counts WebSocket-free appends and requests', async () => {
    const store = createMemoryStore();
    const registry = new Registry();
    new Counter({ name: 'idem_consumer_reconnects_total', help: 'test', registers: [registry] }).inc(3);
    const server = await createServer({ store, metricsRegistries: [registry] });
    try {
      const append = await server.app.inject({
        method: 'POST',
        url: '/v1/streams/m-1/events',
        payload: {
          events: [
            { type: 'a', data: 1 },
            { type: 'b', data: 2 },
          ],
        },
      });
      assert.equal(append.statusCode, 201);
      const text = (await server.app.inject({ method: 'GET', url: '/metrics' })).body;
      assert.match(text, /^idem_consumer_reconnects_total 3$/m);
      assert.match(text, /^idem_appended_events_total 2$/m);
      assert.match(text, /^idem_head_position 2$/m);
      assert.match(
        text,
        /^idem_http_requests_total\{route="\/v1\/streams\/:stream\/events",status="201"\} 1$/m,
      );
    } finally {
      await server.close();
      await store.close();
    }
  });
});
