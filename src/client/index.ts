// `idem/client`: a remote store speaking the server's HTTP + WebSocket protocol.
export { connect, type ConnectOptions } from './connect.js';
export { RemoteEventStore } from './remoteStore.js';
export type { RemoteSubscription } from './remoteSubscription.js';
export { errorFromWire } from './errorFromWire.js';
