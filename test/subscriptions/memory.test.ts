import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { describeSubscriptions } from './subscription.suite.js';

describeSubscriptions('memory', () => {
  const store = createMemoryStore();
  return Promise.resolve({ store, cleanup: () => store.close() });
});
