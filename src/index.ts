// The root entry point `idem`: types, errors, filters, the in-memory reference store
// and the consumer runtime with its effects.
export * from './core/index.js';
export { createMemoryStore, MemoryEventStore } from './memory/memoryStore.js';
export type { MemoryStoreOptions } from './memory/memoryStore.js';
export * from './commands/index.js';
export * from './consumer/index.js';
export * from './effects/index.js';
