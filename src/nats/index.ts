// The `idem/nats` entry point: the NATS JetStream relay and source. Loads the NATS client packages (optional
// peer dependencies) only when a relay starts or a source connects.
export { createJetStreamRelay } from './jetStreamRelay.js';
export type {
  JetStreamRelay,
  JetStreamRelayOptions,
  JetStreamRelayState,
  JetStreamRelayStatus,
} from './jetStreamRelay.js';
export type { RelayStreamCreation } from './relayStream.js';
export { RELAY_HEADERS, eventFromMessage } from './relayMessage.js';
export { jetStreamSource } from './jetStreamSource.js';
export type { JetStreamSource, JetStreamSourceOptions } from './jetStreamSource.js';
