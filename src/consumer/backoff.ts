// The backoff lives in core, where the command handler's retries use it too.
export { backoffDelay, sleep } from '../core/backoff.js';
