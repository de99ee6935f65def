import { describeEventStore } from '../store/eventStore.suite.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

// The contract with statements prepared once per connection (the default), and without (for poolers
// that cannot keep them).
for (const preparedStatements of [true, false]) {
  describeEventStore(
    preparedStatements ? 'postgres' : 'postgres, preparedStatements: false',
    async ({ limits, upcasters } = {}) => {
      const store = await pg.openSharedStore({
        preparedStatements,
        ...(limits ? { limits } : {}),
        ...(upcasters ? { upcasters } : {}),
      });
      return { store, cleanup: () => store.close() };
    },
    { skip: pg.skip },
  );
}
