import { z } from 'zod';
import { apiError, fromZod, notFound, validationFailed } from './api-error.js';
import { liveLoanOr404 } from './routes-loans.js';
import { pageRequest, paginate } from './pagination.js';
import { ok, type RouteContext, type RouteDef, type RouteResult } from './route-table.js';
import { publicDocument } from './serialize.js';
import type { DocumentRecord } from './model.js';

function docOr404(c: RouteContext, attachedOnly: boolean): DocumentRecord {
  const doc = c.state.documents.get(c.params['id'] ?? '');
  const loan = doc ? c.state.liveLoan(doc.loanId) : undefined;
  if (!doc || !loan || loan.orgId !== c.key.orgId || (attachedOnly && !doc.attached))
    throw notFound('document.not_found', 'document');
  return doc;
}

function listDocuments(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  const scope = `docs:${loan.fields.id}`;
  const page = pageRequest(
    { limit: c.query['limit'], offset: c.query['offset'], cursor: c.query['cursor'] },
    scope,
  );
  // Before confirm the bank cannot see a document, so only attached ones are listed.
  const docs = loan.documentIds
    .map((id) => c.state.documents.get(id))
    .filter((d): d is DocumentRecord => d !== undefined && d.attached);
  const p = paginate(docs, page, (d) => [0, d.id], 'asc', scope, c.legacy);
  return ok({ data: p.items.map(publicDocument), meta: p.meta });
}

const confirmSchema = z.looseObject({ period: z.string().min(1).optional() });

function confirm(c: RouteContext): RouteResult {
  const doc = docOr404(c, false);
  const parsed = confirmSchema.safeParse(c.body ?? {});
  if (!parsed.success) throw fromZod(parsed.error, c.body ?? null);
  const size = doc.pendingSize ?? doc.bytes.length;
  if (size > c.options.documentMaxBytes) {
    throw apiError(
      400,
      'document.too_large',
      `the uploaded file is ${size} bytes; the cap is ${c.options.documentMaxBytes}`,
      { size, maxBytes: c.options.documentMaxBytes },
    );
  }
  const periods = doc.requirement?.periods ?? [];
  const period = parsed.data.period ?? (periods.length === 1 ? (periods[0] ?? null) : null);
  if (periods.length > 1 && parsed.data.period === undefined) {
    throw apiError(
      400,
      'period_key_required',
      `requirement "${doc.requirement?.name ?? ''}" collects several periods (${periods.join(', ')}); ` +
        'send one as period',
      { periods },
    );
  }
  if (parsed.data.period !== undefined && periods.length > 0 && !periods.includes(parsed.data.period)) {
    throw validationFailed(
      [{ path: ['period'], code: 'invalid_value', message: `period must be one of ${periods.join(', ')}` }],
      c.body,
    );
  }
  const uploadedAt = c.state.nowIso();
  doc.attached = true;
  doc.period = period;
  doc.requirementStatus = 'PENDING';
  doc.versions.push({ version: doc.versions.length + 1, size, uploadedAt, period });
  doc.pendingSize = null;
  c.state.emit('document.uploaded', {
    loanId: doc.loanId,
    documentId: doc.id,
    name: doc.name,
    version: doc.versions.length,
  });
  return ok({ data: publicDocument(doc) });
}

function download(c: RouteContext): RouteResult {
  const doc = docOr404(c, true);
  const { url, expiresAt } = c.blobs.sign(doc.id);
  return ok({ data: { url, expiresAt, name: doc.name, type: doc.type, size: doc.bytes.length } });
}

export const documentRoutes: RouteDef[] = [
  { method: 'GET', pattern: '/loans/:id/documents', permission: 'read:documents', handler: listDocuments },
  { method: 'POST', pattern: '/documents/:id/confirm', permission: 'write:documents', handler: confirm },
  { method: 'GET', pattern: '/documents/:id/download', permission: 'read:documents', handler: download },
];
