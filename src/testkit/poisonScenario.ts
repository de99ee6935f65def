import type { RecordedEvent } from '../core/event.js';
import { InjectedFault } from './faults.js';
import type { Scenario } from './scenarios.js';
import { scenario } from './scenarios.js';

/**
 * A copy of `e` whose `data` throws while `poison.active`: the handler fails on this one event, as on a
 * bug that a later deployment fixes, and the consumer's own `onError` decides what happens.
 */
function poisoned(e: RecordedEvent, poison: { active: boolean; hits: number }): RecordedEvent {
  const copy = { ...e };
  Object.defineProperty(copy, 'data', {
    enumerable: true,
    get() {
      if (!poison.active) return e.data;
      poison.hits++;
      throw new InjectedFault(`poison event ${e.type} at position ${e.position}`);
    },
  });
  return copy;
}

const POLL_MS = 20;

export const poison: Scenario = {
  id: 'poison',
  title: "a poison event under the consumer's onError",
  statement: 'atomic-commit',
  skip: (facts) => (facts.delivered.length === 0 ? 'the consumer handles no event of the history' : null),
  run: (subject, history, facts) =>
    scenario(subject, history, async (s) => {
      // The middle event, so that a batch has events before it (their work must survive its rollback).
      const target = facts.delivered[Math.floor(facts.delivered.length / 2)]!;
      const state = { active: true, hits: 0 };
      s.hooks.transform = async function* (it) {
        for (let r = await it.next(); !r.done; r = await it.next()) {
          const m = r.value;
          yield m.kind === 'events'
            ? { ...m, events: m.events.map((e) => (e.id === target.id ? poisoned(e, state) : e)) }
            : m;
        }
      };
      const c = s.make();
      let stopped: unknown = null;
      try {
        await s.runToEnd(c);
      } catch (err) {
        stopped = err;
      }
      if (state.hits === 0) {
        s.notes.push("the handler never read the poison event's data: nothing was injected");
        return;
      }
      const info = await s.store.consumers.get(c.name);
      const parked = await s.store.deadLetters.list(c.name);
      if (stopped !== null) {
        s.notes.push(`onError stopped the consumer at position ${target.position}; restarted after the fix`);
        if (info.position >= target.position)
          s.violation = `the cursor is at ${info.position}, past the failed event at ${target.position}`;
        state.active = false;
        await s.runToEnd(s.make());
        return;
      }
      if (!parked.some((d) => d.event.id === target.id)) {
        s.violation = `the event at ${target.position} failed ${state.hits} times, yet it is neither handled, parked nor stopped at`;
        return;
      }
      s.notes.push(`onError dead-lettered position ${target.position}; retried after the fix`);
      state.active = false;
      const c2 = s.make();
      await s.start(c2);
      try {
        await s.store.deadLetters.retry(c2.name, { stream: target.stream });
        const deadline = Date.now() + subject.timeoutMs;
        while ((await s.store.deadLetters.list(c2.name)).length > 0) {
          if (Date.now() > deadline) {
            s.violation = `the retried dead letters of ${target.stream} were not handled within ${subject.timeoutMs} ms`;
            break;
          }
          await new Promise((res) => setTimeout(res, POLL_MS));
        }
      } finally {
        await c2.stop();
      }
    }),
};
