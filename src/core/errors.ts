/**
 * Error classes with stable codes. The server maps codes to HTTP statuses and the CLI to exit codes;
 * the core never chooses either.
 */

export type ErrorCode =
  | 'wrong_expected_version'
  | 'idempotency_conflict'
  | 'consumer_busy'
  | 'consumer_identity_conflict'
  | 'fenced'
  | 'invalid_input'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'too_large'
  | 'rate_limited'
  | 'storage_full'
  | 'unavailable'
  | 'closed'
  | 'upcast_failed'
  | 'internal';

/** Base class of every error idem throws on purpose. `code` is stable and safe to switch on. */
export class IdemError extends Error {
  readonly code: ErrorCode;
  /** Structured facts about the failure (field names, versions, ...), safe to serialise. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(
    code: ErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'IdemError';
    this.code = code;
    this.details = details;
  }

  toJSON(): { code: ErrorCode; message: string; details: Readonly<Record<string, unknown>> } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

export class WrongExpectedVersionError extends IdemError {
  constructor(
    readonly stream: string,
    readonly expected: string | number,
    readonly actual: number,
  ) {
    super(
      'wrong_expected_version',
      `stream "${stream}": expected version ${String(expected)}, but the stream is at version ${actual}`,
      { stream, expected, actual },
    );
    this.name = 'WrongExpectedVersionError';
  }
}

export class IdempotencyConflictError extends IdemError {
  constructor(message: string, details: { id: string; stream: string; existingStream?: string }) {
    super('idempotency_conflict', message, details);
    this.name = 'IdempotencyConflictError';
  }
}

export class InvalidInputError extends IdemError {
  /** @param field the offending field as a path, e.g. `events[2].type` */
  constructor(
    readonly field: string,
    rule: string,
  ) {
    super('invalid_input', `${field}: ${rule}`, { field, rule });
    this.name = 'InvalidInputError';
  }
}

export class TooLargeError extends IdemError {
  constructor(field: string, size: number, limit: number) {
    super('too_large', `${field}: ${size} bytes exceeds the limit of ${limit} bytes`, { field, size, limit });
    this.name = 'TooLargeError';
  }
}

export class NotFoundError extends IdemError {
  constructor(what: string, name: string) {
    super('not_found', `${what} "${name}" not found`, { what, name });
    this.name = 'NotFoundError';
  }
}

/** A store opened with `create: false` where none exists: nothing was created. */
export class StoreNotFoundError extends IdemError {
  /** @param message `no store at PATH`, `no idem store in schema X of DATABASE` */
  constructor(message: string, details: Record<string, unknown>) {
    super('not_found', message, { what: 'store', ...details });
    this.name = 'StoreNotFoundError';
  }
}

export class ConsumerBusyError extends IdemError {
  constructor(consumer: string, owner: string | null, leaseExpiresAt: string | null) {
    super(
      'consumer_busy',
      `consumer "${consumer}" is owned by ${owner ?? 'another subscriber'}` +
        (leaseExpiresAt ? ` (lease until ${leaseExpiresAt})` : '') +
        '; subscribe with standby to wait for it',
      { consumer, owner, leaseExpiresAt },
    );
    this.name = 'ConsumerBusyError';
  }
}

export class ConsumerIdentityConflictError extends IdemError {
  constructor(consumer: string, existingFilter: unknown, requestedFilter: unknown) {
    super(
      'consumer_identity_conflict',
      `consumer "${consumer}" is registered with another filter; a consumer's identity is its name and filter, ` +
        `so register the new filter under a new versioned name (for example "${nextVersionName(consumer)}")`,
      { consumer, existingFilter, requestedFilter },
    );
    this.name = 'ConsumerIdentityConflictError';
  }
}

export class FencedError extends IdemError {
  constructor(consumer: string, epoch: number, currentEpoch: number | null) {
    super(
      'fenced',
      `consumer "${consumer}": epoch ${epoch} no longer owns the lease` +
        (currentEpoch === null ? '' : ` (current epoch ${currentEpoch})`),
      { consumer, epoch, currentEpoch },
    );
    this.name = 'FencedError';
  }
}

export class StorageFullError extends IdemError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('storage_full', message, {}, options);
    this.name = 'StorageFullError';
  }
}

export class ClosedError extends IdemError {
  constructor(what: string) {
    super('closed', `${what} is closed`, { what });
    this.name = 'ClosedError';
  }
}

/** `billing` -> `billing_v2`, `billing_v2` -> `billing_v3`. */
export function nextVersionName(name: string): string {
  const m = /^(.*)_v(\d+)$/.exec(name);
  return m ? `${m[1]}_v${Number(m[2]) + 1}` : `${name}_v2`;
}

export function isIdemError(err: unknown, code?: ErrorCode): err is IdemError {
  return err instanceof IdemError && (code === undefined || err.code === code);
}
