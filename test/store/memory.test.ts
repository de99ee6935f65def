import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { describeEventStore } from './eventStore.suite.js';

describeEventStore('memory', ({ limits } = {}) => {
  const store = createMemoryStore(limits ? { limits } : {});
  return Promise.resolve({ store, cleanup: () => store.close() });
});
