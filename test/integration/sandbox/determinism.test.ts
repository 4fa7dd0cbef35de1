import { describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

async function snapshot(h: Harness): Promise<unknown> {
  const loans = (await h.api('/public/v1/loans?limit=100')).body.data;
  const queue = (await h.api('/public/v1/loans/boarding-queue?limit=100')).body.data.map(
    (l: { id: string }) => l.id,
  );
  const entities = [];
  const documents = [];
  for (const l of loans.slice(0, 5) as Array<{ id: string }>) {
    entities.push((await h.api(`/public/v1/loans/${encodeURIComponent(l.id)}/entities`)).body.data);
    documents.push((await h.api(`/public/v1/loans/${encodeURIComponent(l.id)}/documents`)).body.data);
  }
  return { loans, queue, entities, documents };
}

describe('seeded data', () => {
  it('two sandboxes with the same seed serve the same loans, queue, entities and documents; another seed differs', async () => {
    const [a, b, c] = await Promise.all([
      startHarness({ loans: 15, seed: 9 }),
      startHarness({ loans: 15, seed: 9 }),
      startHarness({ loans: 15, seed: 10 }),
    ]);
    try {
      const [sa, sb, sc] = await Promise.all([snapshot(a), snapshot(b), snapshot(c)]);
      expect(sb).toEqual(sa);
      expect(sc).not.toEqual(sa);
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });
});
