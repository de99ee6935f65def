import { describeEventStore } from '../store/eventStore.suite.js';
import { variants } from '../support/fast.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

// The contract with statements prepared once per connection (the default), and without (for poolers
// that cannot keep them); the inner loop (`npm run test:fast`) runs the default only.
for (const preparedStatements of variants([true, false])) {
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
