import { describeEventStore } from '../store/eventStore.suite.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

describeEventStore(
  'postgres',
  async ({ limits, upcasters } = {}) => {
    const store = await pg.openSharedStore({
      ...(limits ? { limits } : {}),
      ...(upcasters ? { upcasters } : {}),
    });
    return { store, cleanup: () => store.close() };
  },
  { skip: pg.skip },
);
