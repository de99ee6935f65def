/** The server's Prometheus metrics: its own counters plus store and consumer gauges read at scrape time. */
import { Counter, Gauge, Registry } from 'prom-client';
import type { AppendResult } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import type { ConsumerStatus } from '../core/subscription.js';
import { ConsumerReports } from './consumerReports.js';

const STATUSES: readonly ConsumerStatus[] = ['running', 'idle', 'stopped', 'failed', 'paused'];

export class ServerMetrics {
  readonly registry = new Registry();
  /** What remote consumers report over their WebSocket, rendered beside the rest. */
  readonly reports = new ConsumerReports();
  /** Further registries rendered on /metrics too, e.g. consumers' (`createConsumer({ metrics: { registry } })`). */
  constructor(private readonly extra: readonly Registry[] = []) {}

  private readonly appends = new Counter({
    name: 'idem_appends_total',
    help: 'Append requests served, by result (created or duplicate)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  private readonly appendedEvents = new Counter({
    name: 'idem_appended_events_total',
    help: 'Events written by append requests to this server (duplicates not counted)',
    registers: [this.registry],
  });
  private readonly head = new Gauge({
    name: 'idem_head_position',
    help: 'Position of the last committed event in the store',
    registers: [this.registry],
  });
  private readonly consumerPosition = new Gauge({
    name: 'idem_consumer_position',
    help: "Consumer's last acknowledged position (its cursor)",
    labelNames: ['consumer'] as const,
    registers: [this.registry],
  });
  private readonly consumerLag = new Gauge({
    name: 'idem_consumer_lag_events',
    help: 'Matching events after the consumer cursor',
    labelNames: ['consumer'] as const,
    registers: [this.registry],
  });
  private readonly consumerLagSeconds = new Gauge({
    name: 'idem_consumer_lag_seconds',
    help: 'Age in seconds of the oldest unacknowledged matching event',
    labelNames: ['consumer'] as const,
    registers: [this.registry],
  });
  private readonly consumerParked = new Gauge({
    name: 'idem_consumer_parked',
    help: 'Active dead letters (parked or retrying) of the consumer',
    labelNames: ['consumer'] as const,
    registers: [this.registry],
  });
  private readonly consumerStatus = new Gauge({
    name: 'idem_consumer_status',
    help: 'Consumer status: 1 for the current status, 0 for the others',
    labelNames: ['consumer', 'status'] as const,
    registers: [this.registry],
  });
  private readonly consumerEpoch = new Gauge({
    name: 'idem_consumer_epoch',
    help: 'Fencing epoch of the consumer (increases on every takeover)',
    labelNames: ['consumer'] as const,
    registers: [this.registry],
  });
  private readonly partitionPosition = new Gauge({
    name: 'idem_consumer_partition_position',
    help: 'Last acknowledged position of a consumer group partition',
    labelNames: ['consumer', 'partition'] as const,
    registers: [this.registry],
  });
  private readonly partitionLag = new Gauge({
    name: 'idem_consumer_partition_lag_events',
    help: 'Matching events after a consumer group partition cursor',
    labelNames: ['consumer', 'partition'] as const,
    registers: [this.registry],
  });
  private readonly partitionEpoch = new Gauge({
    name: 'idem_consumer_partition_epoch',
    help: 'Fencing epoch of a consumer group partition',
    labelNames: ['consumer', 'partition'] as const,
    registers: [this.registry],
  });
  private readonly partitionOwned = new Gauge({
    name: 'idem_consumer_partition_owned',
    help: 'Consumer group partitions by owner (1 while the member holds a live lease on it)',
    labelNames: ['consumer', 'partition', 'owner'] as const,
    registers: [this.registry],
  });
  readonly wsConnections = new Gauge({
    name: 'idem_ws_connections',
    help: 'Open WebSocket connections on /v1/subscribe',
    registers: [this.registry],
  });
  readonly wsSubscriptions = new Gauge({
    name: 'idem_ws_subscriptions',
    help: 'Subscriptions held (or waiting as standby) over WebSocket connections',
    registers: [this.registry],
  });
  readonly wsEventsSent = new Counter({
    name: 'idem_ws_events_sent_total',
    help: 'Events sent to WebSocket subscribers (redeliveries included)',
    registers: [this.registry],
  });
  readonly wsAcks = new Counter({
    name: 'idem_ws_acks_total',
    help: 'Acknowledgements received from WebSocket subscribers',
    registers: [this.registry],
  });
  readonly wsAppendConnections = new Gauge({
    name: 'idem_ws_append_connections',
    help: 'Open WebSocket connections on /v1/appends/ws',
    registers: [this.registry],
  });
  readonly wsAppendFrames = new Counter({
    name: 'idem_ws_append_frames_total',
    help: 'Frames received on /v1/appends/ws, by outcome (results: answered append by append; error: refused whole; closed: closed the connection)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly httpRequests = new Counter({
    name: 'idem_http_requests_total',
    help: 'HTTP requests served, by route and status code',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });

  appended(result: AppendResult): void {
    this.appends.inc({ result: result.duplicate ? 'duplicate' : 'created' });
    if (!result.duplicate) this.appendedEvents.inc(result.lastPosition - result.firstPosition + 1);
  }

  /** Reads the store and the consumers, then renders the Prometheus text format. */
  async render(store: EventStore): Promise<string> {
    this.head.set(await store.headPosition());
    const consumers = await store.consumers.list();
    for (const g of [
      this.consumerPosition,
      this.consumerLag,
      this.consumerLagSeconds,
      this.consumerParked,
      this.consumerStatus,
      this.consumerEpoch,
      this.partitionPosition,
      this.partitionLag,
      this.partitionEpoch,
      this.partitionOwned,
    ]) {
      g.reset();
    }
    for (const c of consumers) {
      const labels = { consumer: c.name };
      this.consumerPosition.set(labels, c.position);
      // A consumer listed with an error has no known lag: its lag series are left out.
      if (!c.error) {
        this.consumerLag.set(labels, c.lag);
        this.consumerLagSeconds.set(labels, c.lagSeconds);
      }
      this.consumerParked.set(labels, c.parked);
      this.consumerEpoch.set(labels, c.epoch);
      for (const s of STATUSES)
        this.consumerStatus.set({ consumer: c.name, status: s }, c.status === s ? 1 : 0);
      for (const p of c.partitions ?? []) {
        const partition = { consumer: c.name, partition: String(p.index) };
        this.partitionPosition.set(partition, p.position);
        this.partitionLag.set(partition, p.lag);
        this.partitionEpoch.set(partition, p.epoch);
        if (p.owner !== null) this.partitionOwned.set({ ...partition, owner: p.owner }, 1);
      }
    }
    const text =
      this.extra.length === 0
        ? await this.registry.metrics()
        : await Registry.merge([this.registry, ...this.extra]).metrics();
    return this.reports.render(text);
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
