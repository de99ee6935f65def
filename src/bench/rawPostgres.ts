import type * as Pg from 'pg';
import type { RawRow } from './workload.js';

/** The same events table as the PostgreSQL store's, in its own schema, so raw inserts pay for the same indexes. */
const EVENTS_DDL = `
  CREATE SCHEMA IF NOT EXISTS raw;
  CREATE TABLE IF NOT EXISTS raw.events (
    position    bigint      PRIMARY KEY,
    id          uuid        NOT NULL UNIQUE,
    stream      text        NOT NULL,
    version     integer     NOT NULL,
    type        text        NOT NULL,
    data        json        NOT NULL,
    metadata    json        NOT NULL,
    recorded_at timestamptz NOT NULL,
    UNIQUE (stream, version)
  )`;

/**
 * The baseline writer: one `pg` client, plain INSERT statements (autocommit: one transaction each),
 * positions and versions kept in memory (no reads).
 */
export class RawPostgresEvents {
  private readonly versions = new Map<string, number>();
  private position = 0;
  private readonly sqlByRows = new Map<number, string>();

  private constructor(private readonly client: Pg.Client) {}

  static async open(pg: typeof Pg, connectionString: string): Promise<RawPostgresEvents> {
    const client = new pg.Client({ connectionString });
    await client.connect();
    await client.query(EVENTS_DDL);
    return new RawPostgresEvents(client);
  }

  /** One INSERT of `rows` (one multi-VALUES statement, one transaction); answers the last row's position. */
  async write(rows: readonly RawRow[]): Promise<number> {
    const params: unknown[] = [];
    const now = new Date().toISOString();
    let last = this.position;
    for (const r of rows) {
      const version = (this.versions.get(r.stream) ?? 0) + 1;
      this.versions.set(r.stream, version);
      last = ++this.position;
      params.push(last, r.id, r.stream, version, r.type, r.data, r.metadata, now);
    }
    await this.client.query({
      text: this.insertSql(rows.length),
      values: params,
      name: `raw_insert_${rows.length}`,
    });
    return last;
  }

  async close(): Promise<void> {
    await this.client.end();
  }

  private insertSql(n: number): string {
    let sql = this.sqlByRows.get(n);
    if (!sql) {
      const values = Array.from({ length: n }, (_, i) => {
        const b = i * 8;
        return `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}, $${b + 7}, $${b + 8})`;
      });
      sql = `INSERT INTO raw.events (position, id, stream, version, type, data, metadata, recorded_at) VALUES ${values.join(', ')}`;
      this.sqlByRows.set(n, sql);
    }
    return sql;
  }
}
