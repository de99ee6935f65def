/** Waiting for an in-process consumer to catch up after a scenario's faults. */
import type { Consumer } from '../src/consumer/consumer.js';

/**
 * Waits until `consumer` has caught up with the head as it is when called. A consumer that the
 * faults (or a slow machine) hold back may take a long time and passes; one whose position has not
 * moved for `stallMs` is stuck, and fails.
 */
export async function caughtUpWhileMoving(consumer: Consumer, stallMs = 60_000): Promise<void> {
  const caughtUp = consumer.whenCaughtUp();
  // Its rejection is handled even when this stops waiting for it (a stuck consumer, then stopped).
  caughtUp.catch(() => undefined);
  let position = consumer.status().position;
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), stallMs)));
    try {
      if (!(await Promise.race([caughtUp.then(() => false), stalled]))) return;
    } finally {
      clearTimeout(timer);
    }
    const now = consumer.status().position;
    if (now === position) {
      const head = consumer.metrics().head;
      throw new Error(
        `consumer "${consumer.name}" did not move from position ${now} in ${stallMs} ms (head ${head})`,
      );
    }
    position = now;
  }
}
