import type { Client, Notification } from 'pg';
import { AppendListeners } from '../core/appendListeners.js';

export interface AppendNotifierOptions {
  /** Makes a new, unconnected client for the dedicated LISTEN connection. */
  makeClient: () => Client;
  /** The channel `append_events` notifies with the new head position. */
  channel: string;
  /** Reads the committed head position (used while LISTEN is down, and after it reconnects). */
  readHead: () => Promise<number>;
  /** How often the head is polled while the LISTEN connection is down. @default 250 */
  pollIntervalMs?: number;
  /** Longest wait between two reconnection attempts. @default 5000 */
  maxReconnectDelayMs?: number;
}

/**
 * The store's in-process `onAppend` hook, fed by LISTEN/NOTIFY on a dedicated connection, by this
 * process's own commits, and by polling the head while that connection is down. Starts listening when
 * the first listener is added. Listeners hear each new head at most once, in increasing order.
 */
export class AppendNotifier {
  private readonly listeners = new AppendListeners();
  private client: Client | null = null;
  private listening = false;
  private started = false;
  private closed = false;
  private lastHead = 0;
  private reconnectDelay = 50;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private polling = false;
  /** Whether other processes' commits are wanted (LISTEN); this process's are heard either way. */
  private wanted = true;
  /** LISTEN and UNLISTEN, one after another. */
  private toggling: Promise<void> = Promise.resolve();
  /** Times the LISTEN connection was lost (for tests and metrics). */
  disconnects = 0;

  constructor(private readonly options: AppendNotifierOptions) {}

  add(listener: (head: number) => void): () => void {
    const remove = this.listeners.add(listener);
    if (!this.started && !this.closed) {
      this.started = true;
      this.connect();
    }
    return remove;
  }

  /** Reports a head this process committed (or read); listeners hear it if it is new. */
  observe(head: number): void {
    if (this.closed || head <= this.lastHead) return;
    this.lastHead = head;
    this.listeners.emit(head);
  }

  /** True while the LISTEN connection is up and listening. */
  get isListening(): boolean {
    return this.listening;
  }

  /**
   * Hear other processes' commits (LISTEN) or not (UNLISTEN: their notifications then cost nothing
   * here). Turned on again, the head is read once, so commits made meanwhile are heard.
   */
  want(on: boolean): void {
    if (on === this.wanted) return;
    this.wanted = on;
    const client = this.client;
    if (client) this.apply(client);
  }

  /** Brings `client`'s LISTEN in line with `wanted`, after any change under way. */
  private apply(client: Client): void {
    this.toggling = this.toggling
      .then(async () => {
        if (this.client !== client || this.closed || this.wanted === this.listening) return;
        const on = this.wanted;
        await client.query(`${on ? 'LISTEN' : 'UNLISTEN'} "${this.options.channel}"`);
        if (this.client !== client) return;
        this.listening = on;
        // Commits made while nobody listened produced no notification we heard.
        if (on) this.readHeadOnce();
      })
      .catch(() => {
        // A connection that cannot LISTEN is made again (see `connect`).
        if (this.client === client) client.end().catch(() => undefined);
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.stopPolling();
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    const c = this.client;
    this.client = null;
    this.listening = false;
    if (c) await c.end().catch(() => undefined);
  }

  private connect(): void {
    if (this.closed) return;
    const client = this.options.makeClient();
    this.client = client;
    let failed = false;
    const fail = (): void => {
      if (failed) return;
      failed = true;
      if (this.client === client) this.client = null;
      if (this.listening) this.disconnects++;
      this.listening = false;
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    client.on('error', fail);
    client.on('end', fail);
    client.on('notification', (msg: Notification) => {
      if (msg.channel !== this.options.channel) return;
      const head = Number(msg.payload);
      if (Number.isSafeInteger(head)) this.observe(head);
    });
    client
      .connect()
      .then(() => {
        if (failed || this.closed) return;
        this.reconnectDelay = 50;
        this.stopPolling();
        if (this.wanted) this.apply(client);
        // Commits made while the connection was down.
        else this.readHeadOnce();
      })
      .catch(fail);
  }

  /** Reads the head once, so that listeners hear commits no notification told of. */
  private readHeadOnce(): void {
    this.options
      .readHead()
      .then((head) => this.observe(head))
      .catch(() => undefined);
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    this.startPolling();
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, this.options.maxReconnectDelayMs ?? 5000);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect();
    }, delay);
    this.reconnectTimer.unref();
  }

  private startPolling(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setInterval(() => {
      if (this.polling) return;
      this.polling = true;
      this.options
        .readHead()
        .then((head) => this.observe(head))
        .catch(() => undefined)
        .finally(() => {
          this.polling = false;
        });
    }, this.options.pollIntervalMs ?? 250);
    this.pollTimer.unref();
  }

  private stopPolling(): void {
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
  }
}
