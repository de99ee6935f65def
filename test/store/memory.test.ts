import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { describeEventStore } from './eventStore.suite.js';

describeEventStore('memory', ({ limits, upcasters } = {}) => {
  const store = createMemoryStore({ ...(limits ? { limits } : {}), ...(upcasters ? { upcasters } : {}) });
  return Promise.resolve({ store, cleanup: () => store.close() });
});
