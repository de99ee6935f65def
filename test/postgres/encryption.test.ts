import { describeEncryption } from '../store/encryption.suite.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

describeEncryption(
  'postgres',
  async (encrypt) => {
    const store = await pg.openSharedStore({ encrypt });
    return {
      store,
      storedData: async (id) => {
        const r = await store.pool.query<{ data: string }>(
          `SELECT data::text AS data FROM "${store.schema}".events WHERE id = $1`,
          [id],
        );
        return r.rows[0]!.data;
      },
      cleanup: () => store.close(),
    };
  },
  { skip: pg.skip },
);
