// A TCP proxy between the demo's consumer process and the server, which can cut every connection once.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class CuttingProxy {
  /** Connections destroyed by `cut()`. */
  cutConnections = 0;

  private constructor(
    private readonly server: Server,
    private readonly sockets: Set<Socket>,
    readonly url: string,
  ) {}

  static async start(upstreamPort: number): Promise<CuttingProxy> {
    const sockets = new Set<Socket>();
    const server = createServer((client) => {
      const upstream = connect({ host: '127.0.0.1', port: upstreamPort });
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    return new CuttingProxy(server, sockets, `http://127.0.0.1:${port}`);
  }

  /** Destroys every open connection: both ends see it drop, as when a network path fails. */
  cut(): number {
    const n = Math.floor(this.sockets.size / 2);
    for (const s of this.sockets) s.destroy();
    this.cutConnections += n;
    return n;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
