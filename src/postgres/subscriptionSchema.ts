import type { PostgresMigration } from './migrations.js';

/**
 * The consumer-state tables (migration 2): one row per consumer (cursor, lease, epoch, status) and
 * one per dead letter. `lease_token` identifies the `acquire` call that took the current lease, so an
 * acquire retried after a connection fault recognises its own success.
 */
export const SUBSCRIPTION_MIGRATIONS: PostgresMigration[] = [
  {
    version: 2,
    name: 'consumers and dead letters',
    sql: (s) => `
      CREATE TABLE ${s}.consumers (
        name             text        PRIMARY KEY,
        filter           jsonb       NOT NULL,
        filter_key       text        NOT NULL,
        position         bigint      NOT NULL,
        owner            text,
        epoch            bigint      NOT NULL DEFAULT 0,
        lease_expires_at timestamptz,
        lease_token      text,
        status           text        NOT NULL,
        last_error       jsonb,
        failed_event     jsonb,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE ${s}.dead_letters (
        consumer   text        NOT NULL,
        event_id   text        NOT NULL,
        stream     text        NOT NULL,
        position   bigint      NOT NULL,
        event      json        NOT NULL,
        reason     text        NOT NULL,
        error      jsonb,
        attempts   integer     NOT NULL,
        status     text        NOT NULL,
        behind     text,
        parked_at  timestamptz NOT NULL DEFAULT now(),
        skipped_by text,
        skipped_at timestamptz,
        PRIMARY KEY (consumer, event_id)
      );
      CREATE INDEX dead_letters_by_stream ON ${s}.dead_letters (consumer, stream, position);
      CREATE INDEX dead_letters_by_status ON ${s}.dead_letters (consumer, status, position);
    `,
  },
  {
    // The position through which each consumer's target pruned its dedup ledger, as the consumer
    // runtime reports it: `consumers.reset` below it is refused.
    version: 5,
    name: 'ledger horizons',
    sql: (s) => `
      CREATE TABLE ${s}.ledger_horizons (
        consumer text   PRIMARY KEY,
        position bigint NOT NULL
      );
    `,
  },
  {
    // A consumer's pause: its reason (null while not paused), since when, and by whom.
    version: 7,
    name: 'consumer pause',
    sql: (s) => `
      ALTER TABLE ${s}.consumers ADD COLUMN pause_reason text;
      ALTER TABLE ${s}.consumers ADD COLUMN paused_at timestamptz;
      ALTER TABLE ${s}.consumers ADD COLUMN paused_by text;
    `,
  },
  {
    // Automatic redrive of dead letters: how many were done, and when the next is due.
    version: 8,
    name: 'dead-letter redrive',
    sql: (s) => `
      ALTER TABLE ${s}.dead_letters ADD COLUMN redrives integer NOT NULL DEFAULT 0;
      ALTER TABLE ${s}.dead_letters ADD COLUMN redrive_at timestamptz;
      CREATE INDEX dead_letters_redrive ON ${s}.dead_letters (consumer, redrive_at) WHERE redrive_at IS NOT NULL;
    `,
  },
];
