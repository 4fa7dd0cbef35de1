import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type J } from './harness.js';

async function loanWithDocuments(h: Harness): Promise<{ loanId: string; docs: J[] }> {
  for (const { id } of (await h.admin('/loans')).data) {
    const r = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/documents`);
    if (r.body.data.length > 0) return { loanId: id, docs: r.body.data };
  }
  throw new Error('no loan with documents');
}

describe('documents', () => {
  let h: Harness;
  let clockOffset = 0;
  beforeAll(async () => {
    h = await startHarness({ loans: 12, documentMaxBytes: 1_000_000, now: () => Date.now() + clockOffset });
  });
  afterAll(() => h.close());

  it('lists documents with the record fields and downloads real bytes without Authorization', async () => {
    const { docs } = await loanWithDocuments(h);
    expect(docs[0]).toMatchObject({
      id: expect.any(String),
      name: expect.any(String),
      type: expect.any(String),
      size: expect.any(Number),
      category: expect.any(String),
      uploadedAt: expect.any(String),
    });
    const addr = await h.api(`/public/v1/documents/${encodeURIComponent(docs[0].id)}/download`);
    expect(addr.status).toBe(200);
    const { url, expiresAt } = addr.body.data;
    expect(new URL(url).origin).not.toBe(new URL(h.sb.baseUrl).origin); // a separate blob server
    const ttl = Date.parse(expiresAt) - Date.now();
    expect(ttl).toBeGreaterThan(4 * 60_000);
    expect(ttl).toBeLessThanOrEqual(5 * 60_000);
    const blob = await fetch(url);
    expect(blob.status).toBe(200);
    const bytes = Buffer.from(await blob.arrayBuffer());
    expect(bytes.length).toBe(docs[0].size);
    if (docs[0].type === 'application/pdf') expect(bytes.subarray(0, 5).toString()).toBe('%PDF-');
    const counters = await h.admin('/counters');
    expect(counters.downloads).toBe(1);
  });

  it('rejects and counts a download that carries an Authorization header', async () => {
    const { docs } = await loanWithDocuments(h);
    const { url } = (await h.api(`/public/v1/documents/${encodeURIComponent(docs[0].id)}/download`)).body
      .data;
    const r = await fetch(url, { headers: { authorization: `Bearer ${h.sb.apiKey}` } });
    expect(r.status).toBe(403);
    const counters = await h.admin('/counters');
    expect(counters.downloadsWithAuthorization).toBe(1);
    const tampered = await fetch(url.replace(/signature=[^&]+/, 'signature=AAAA'));
    expect(tampered.status).toBe(403);
  });

  it('a download address expires after 5 minutes', async () => {
    const { docs } = await loanWithDocuments(h);
    const { url } = (await h.api(`/public/v1/documents/${encodeURIComponent(docs[0].id)}/download`)).body
      .data;
    clockOffset = 5 * 60_000 + 1_000;
    try {
      expect((await fetch(url)).status).toBe(403);
    } finally {
      clockOffset = 0;
    }
    expect((await h.api('/public/v1/documents/doc_nope/download')).body.code).toBe('document.not_found');
  });

  it('injects faults on presigned downloads: 503, and a body cut short after the headers', async () => {
    const { docs } = await loanWithDocuments(h);
    const { url } = (await h.api(`/public/v1/documents/${encodeURIComponent(docs[0].id)}/download`)).body
      .data;
    await h.admin('/faults', 'PUT', {
      rules: [
        { route: 'GET /blobs/:id', status5xxRate: 1, count: 1 },
        { route: 'GET /blobs/:id', resetAfterCommitRate: 1, count: 1 },
      ],
    });
    try {
      expect((await fetch(url)).status).toBe(503);
      const cut = await fetch(url);
      expect(cut.status).toBe(200);
      await expect(cut.arrayBuffer()).rejects.toThrow();
      expect((await fetch(url)).status).toBe(200);
      const c = await h.admin('/counters');
      expect(c.requests['GET /blobs/:id']).toBeGreaterThanOrEqual(3);
    } finally {
      await h.admin('/faults', 'DELETE');
    }
  });

  it('generates odd document names', async () => {
    const names: string[] = [];
    for (const { id } of (await h.admin('/loans')).data)
      names.push(
        ...(await h.api(`/public/v1/loans/${encodeURIComponent(id)}/documents`)).body.data.map(
          (d: J) => d.name,
        ),
      );
    expect(
      names.some((n) => /[^\x20-\x7e]/.test(n) || n.includes('..') || n.includes(' ') || n.length > 100),
    ).toBe(true);
  });

  it('confirm: size cap, period_key_required, a period from the list, another version on a second call', async () => {
    const loanId = (await h.admin('/loans')).data[0].id;
    const multi = await h.admin(`/loans/${encodeURIComponent(loanId)}/documents`, 'POST', {
      name: 'returns.pdf',
      periods: ['2023', '2024'],
    });
    const before = (await h.api(`/public/v1/loans/${encodeURIComponent(loanId)}/documents`)).body.data.map(
      (d: J) => d.id,
    );
    expect(before).not.toContain(multi.documentId); // not visible before confirm
    const missing = await h.api(`/public/v1/documents/${encodeURIComponent(multi.documentId)}/confirm`, {
      method: 'POST',
      body: {},
    });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('period_key_required');
    const wrong = await h.api(`/public/v1/documents/${encodeURIComponent(multi.documentId)}/confirm`, {
      method: 'POST',
      body: { period: '1999' },
    });
    expect(wrong.status).toBe(400);
    const ok = await h.api(`/public/v1/documents/${encodeURIComponent(multi.documentId)}/confirm`, {
      method: 'POST',
      body: { period: '2024' },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({
      id: multi.documentId,
      version: 1,
      requirement: { status: 'PENDING', entityType: 'loan', entityID: loanId, period: '2024' },
    });
    const again = await h.api(`/public/v1/documents/${encodeURIComponent(multi.documentId)}/confirm`, {
      method: 'POST',
      body: { period: '2023' },
    });
    expect(again.body.data.version).toBe(2);
    const after = (await h.api(`/public/v1/loans/${encodeURIComponent(loanId)}/documents`)).body.data.map(
      (d: J) => d.id,
    );
    expect(after).toContain(multi.documentId);

    const single = await h.admin(`/loans/${encodeURIComponent(loanId)}/documents`, 'POST', {
      periods: ['2025'],
    });
    expect(
      (
        await h.api(`/public/v1/documents/${encodeURIComponent(single.documentId)}/confirm`, {
          method: 'POST',
        })
      ).status,
    ).toBe(200);

    const big = await h.admin(`/loans/${encodeURIComponent(loanId)}/documents`, 'POST', { size: 1_000_001 });
    const tooBig = await h.api(`/public/v1/documents/${encodeURIComponent(big.documentId)}/confirm`, {
      method: 'POST',
      body: {},
    });
    expect(tooBig.status).toBe(400);
    expect(tooBig.body.code).toBe('document.too_large');
    expect(
      (await h.api('/public/v1/documents/doc_nope/confirm', { method: 'POST', body: {} })).body.code,
    ).toBe('document.not_found');
  });
});
