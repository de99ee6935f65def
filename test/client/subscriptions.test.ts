// The durable-subscription behaviour suite, run against the remote client: WebSocket subscriptions to a server on SQLite.
import { connect } from '../../src/client/connect.js';
import { describeSubscriptions } from '../subscriptions/subscription.suite.js';
import { startTestServer } from '../server/serverFixture.js';

describeSubscriptions('remote client (WebSocket to a server on SQLite)', async () => {
  const fixture = await startTestServer();
  const store = connect(fixture.url);
  return {
    store,
    cleanup: async () => {
      await store.close();
      await fixture.cleanup();
    },
    // Another client of the same server, as another process would be.
    reopen: () => {
      const other = connect(fixture.url);
      return Promise.resolve({ store: other, cleanup: () => other.close() });
    },
  };
});
