// The `idem/nats` entry point: the NATS JetStream relay. Loads the NATS client packages (optional
// peer dependencies) only when a relay starts.
export { createJetStreamRelay } from './jetStreamRelay.js';
export type {
  JetStreamRelay,
  JetStreamRelayOptions,
  JetStreamRelayState,
  JetStreamRelayStatus,
} from './jetStreamRelay.js';
export type { RelayStreamCreation } from './relayStream.js';
export { RELAY_HEADERS, eventFromMessage } from './relayMessage.js';
