// The root entry point: types, errors, the consumer runtime and the in-memory reference store.
export * from './core/index.js';
