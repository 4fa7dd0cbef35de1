import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pageRequest, paginate, type SortValue } from '../../../src/sandbox/pagination.js';

describe('cursor pagination', () => {
  it('never skips or repeats while arbitrary items are removed between pages', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.integer({ min: 0, max: 59 }), { maxLength: 30 }),
        (n, limit, removals) => {
          let items = Array.from({ length: n }, (_, i) => ({
            id: `id${String(i).padStart(3, '0')}`,
            t: Math.floor(i / 3),
          }));
          const keyOf = (x: { id: string; t: number }): [SortValue, string] => [x.t, x.id];
          const removed = new Set<string>();
          const seen: string[] = [];
          let cursor = '';
          for (let guard = 0; guard < 200; guard += 1) {
            const page = paginate(
              items,
              pageRequest({ limit, offset: undefined, cursor }, 's'),
              keyOf,
              'asc',
              's',
              false,
            );
            seen.push(...page.items.map((x) => x.id));
            const r = removals.shift();
            if (r !== undefined) {
              removed.add(`id${String(r).padStart(3, '0')}`);
              items = items.filter((x) => !removed.has(x.id));
            }
            if (!page.meta['hasMore']) break;
            cursor = page.meta['nextCursor'] as string;
          }
          expect(new Set(seen).size).toBe(seen.length);
          for (let i = 0; i < n; i += 1) {
            const id = `id${String(i).padStart(3, '0')}`;
            if (!removed.has(id)) expect(seen).toContain(id);
          }
        },
      ),
    );
  });

  it('offset meta has no total except on the legacy prefix', () => {
    const items = [1, 2, 3].map((i) => ({ id: String(i) }));
    const req = pageRequest({ limit: '2', offset: '0', cursor: undefined }, 's');
    expect(paginate(items, req, (x) => [0, x.id], 'asc', 's', false).meta).toEqual({
      mode: 'offset',
      limit: 2,
      offset: 0,
      hasMore: true,
    });
    expect(paginate(items, req, (x) => [0, x.id], 'asc', 's', true).meta).toEqual({
      mode: 'offset',
      limit: 2,
      offset: 0,
      hasMore: true,
      total: 3,
    });
  });
});
