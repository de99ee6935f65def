import { hostname, userInfo } from 'node:os';

/** Who acts when an admin call names nobody: `user@host` of this process. */
export function defaultActor(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    return `pid ${process.pid}@${hostname()}`;
  }
}
