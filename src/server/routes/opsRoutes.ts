/** Operational routes: `/health`, `/metrics` and the dashboard at `/` (with its script and style sheet). */
import type { FastifyInstance } from 'fastify';
import { IdemError } from '../../core/errors.js';
import type { RouteContext } from '../context.js';
import { DASHBOARD_FILES, DASHBOARD_HEADERS, dashboardFile } from '../dashboard.js';
import { checkHealth, type MigrationStatus } from '../storeHealth.js';

export function registerOpsRoutes(
  app: FastifyInstance,
  ctx: RouteContext,
  migrations?: () => MigrationStatus | Promise<MigrationStatus>,
): void {
  app.get('/health', async (_req, reply) => {
    const report = await checkHealth(ctx.store, migrations);
    return reply.code(report.status === 'ok' ? 200 : 503).send(report);
  });

  app.get('/metrics', { config: { scope: 'read' } }, async (req, reply) => {
    if (req.principal.streamPrefixes !== null) {
      throw new IdemError(
        'forbidden',
        `token "${req.principal.name}" is limited to some streams; /metrics covers all of them`,
      );
    }
    const text = await ctx.metrics.render(ctx.store);
    return reply.type(ctx.metrics.contentType).send(text);
  });

  for (const path of Object.keys(DASHBOARD_FILES)) {
    app.get(path, async (_req, reply) => {
      const f = dashboardFile(path);
      return reply.headers(DASHBOARD_HEADERS).type(f.type).send(f.body);
    });
  }
}
