// The EventStore behaviour suite, run against the remote client over a real socket to a server on SQLite.
import { connect } from '../../src/client/connect.js';
import { bySpeed } from '../support/fast.js';
import { describeEventStore } from '../store/eventStore.suite.js';
import { startTestServer } from '../server/serverFixture.js';

describeEventStore(
  'remote client (HTTP to a server on SQLite)',
  async ({ limits, upcasters } = {}) => {
    const fixture = await startTestServer(limits ? { storeLimits: limits } : {});
    let store;
    try {
      // The server's store has no upcasters: the client applies its own.
      store = connect(fixture.url, upcasters ? { upcasters } : {});
    } catch (err) {
      await fixture.cleanup();
      throw err;
    }
    return {
      store,
      cleanup: async () => {
        await store.close();
        await fixture.cleanup();
      },
    };
  },
  // Every command of the contention test reads its whole cart over HTTP, so its time grows with the
  // square of the items: 16 x 25 here; the stores themselves run 16 x 100.
  { largeReadEvents: 5000, cartItems: bySpeed(25, 10) },
);
