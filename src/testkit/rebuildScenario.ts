import type { Scenario } from './scenarios.js';
import { scenario } from './scenarios.js';

/**
 * Version 1 handles the history (its effects are live), then version 2 starts over the same target:
 * a rebuild. Its effects for history are suppressed or found already recorded, and its state (read as
 * version 2) must be the clean run's. Two versions that share one identity share one cursor: version 2
 * then gets nothing delivered.
 */
export const rebuild: Scenario = {
  id: 'rebuild',
  title: 'a new version rebuilds, effects suppressed',
  statement: 'ack-after-processing',
  run: (subject, history) =>
    scenario(subject, history, async (s) => {
      const v1 = await s.runToEnd(s.make(1));
      const v2 = s.make(2);
      if (v2.name === v1.name)
        s.notes.push(`version 2 has the same name as version 1 (${v1.name}): they share one cursor`);
      await s.runToEnd(v2);
      return 2;
    }),
};
