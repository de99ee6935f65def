import { describeEventStore } from '../store/eventStore.suite.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

describeEventStore(
  'postgres',
  async ({ limits } = {}) => {
    const store = await pg.openSharedStore(limits ? { limits } : {});
    return { store, cleanup: () => store.close() };
  },
  { skip: pg.skip },
);
