/** Starting (and restarting on the same port) a server child process. */
import type { ServerChildConfig } from './children/serverChild.js';
import { Child, type ScriptRunner } from './processes.js';

export interface ServerProcess {
  child: Child;
  url: string;
  port: number;
}

export async function startServerChild(
  runner: ScriptRunner,
  config: ServerChildConfig,
  timeoutMs = 120_000,
): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    const child = new Child([...runner.command('server'), JSON.stringify(config)]);
    try {
      const line = await child.waitForLine(
        (l) => l.startsWith('listening '),
        timeoutMs,
        'the server to listen',
      );
      const url = line.slice('listening '.length);
      return { child, url, port: Number(new URL(url).port) };
    } catch (err) {
      await child.kill();
      // The port of a just-killed server can linger briefly; try again a few times.
      if (attempt >= 5 || !/EADDRINUSE/.test(child.stderr)) throw err;
    }
  }
}
