/** A TCP proxy in the test process that cuts every connection on demand and can refuse new ones for a while. */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class CuttingProxy {
  private readonly sockets = new Set<Socket>();
  private downUntil = 0;
  cuts = 0;
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(upstreamHost: string, upstreamPort: number): Promise<CuttingProxy> {
    let proxy: CuttingProxy | null = null;
    const server = createServer((client) => {
      if (!proxy || Date.now() < proxy.downUntil) {
        client.destroy();
        return;
      }
      const upstream = connect({ host: upstreamHost, port: upstreamPort });
      const p = proxy;
      for (const s of [client, upstream]) {
        p.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          p.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    proxy = new CuttingProxy(server, typeof address === 'object' && address ? address.port : 0);
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Destroys every open connection (both sides see a reset). */
  cut(): void {
    this.cuts++;
    for (const s of this.sockets) s.destroy();
  }

  /** Cuts and refuses new connections for `ms`. */
  down(ms: number): void {
    this.downUntil = Date.now() + ms;
    this.cut();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
