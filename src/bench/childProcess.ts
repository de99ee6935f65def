// What the bench's child processes (appenderChild, storeServerChild, groupMemberChild,
// liveServerChild, relayChild) share: how they end.

/**
 * Runs a child's `main`: when it ends, the child lets go of the IPC channel (so the process exits);
 * when it fails, the exit code is 1 and the parent is told `{ kind: 'error', message }` first.
 */
export function runChild(main: () => Promise<void>): void {
  main().then(
    () => {
      if (process.connected) process.disconnect();
    },
    (err: unknown) => {
      process.exitCode = 1;
      process.send?.({
        kind: 'error',
        message: err instanceof Error ? (err.stack ?? err.message) : String(err),
      });
      if (process.connected) process.disconnect();
    },
  );
}
