import type * as Jetstream from '@nats-io/jetstream';
import type * as Transport from '@nats-io/transport-node';
import { IdemError } from '../core/errors.js';

/** The parts of the NATS client packages that idem/nats uses. */
export interface NatsModules {
  connect: typeof Transport.connect;
  headers: typeof Transport.headers;
  jetstream: typeof Jetstream.jetstream;
  jetstreamManager: typeof Jetstream.jetstreamManager;
}

const PACKAGES = '@nats-io/transport-node @nats-io/jetstream';
let loaded: Promise<NatsModules> | undefined;

/**
 * Loads the NATS client packages, optional peer dependencies, on first use. When one is missing the
 * error names the packages to install instead of a bare module-resolution failure.
 */
export function loadNats(): Promise<NatsModules> {
  loaded ??= Promise.all([import('@nats-io/transport-node'), import('@nats-io/jetstream')]).then(
    ([transport, js]) => ({
      connect: transport.connect,
      headers: transport.headers,
      jetstream: js.jetstream,
      jetstreamManager: js.jetstreamManager,
    }),
    (err: unknown) => {
      loaded = undefined;
      const code = (err as { code?: string }).code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
        throw new IdemError(
          'unavailable',
          `idem/nats needs the NATS client packages, which are not installed; install them with: npm install ${PACKAGES}`,
          { package: PACKAGES },
          { cause: err },
        );
      }
      throw err;
    },
  );
  return loaded;
}
