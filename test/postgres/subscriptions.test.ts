import { describeSubscriptions } from '../subscriptions/subscription.suite.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

describeSubscriptions(
  'postgres',
  async () => {
    const store = await pg.openSharedStore();
    return {
      store,
      cleanup: () => store.close(),
      // A second, independent handle on the same schema, as another process would open it.
      reopen: async () => {
        const other = await pg.openStore({ schema: store.schema });
        return { store: other, cleanup: () => other.close() };
      },
    };
  },
  { skip: pg.skip },
);
