import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { MapperOptions } from '../../../src/mapping/compile.js';
import { runFixture } from '../../../src/mapping/fixtures.js';
import { lintMappingDir, loadFixtures, loadMapper } from '../../../src/mapping-sets/loader.js';
import type { Mapper } from '../../../src/mapping/types.js';

const root = join(import.meta.dirname, '../../../mappings');

for (const set of ['generic', 'fineract', 'mambu']) {
  const dir = join(root, set);
  describe(`mapping set ${set}`, () => {
    it('lints clean', () => {
      const r = lintMappingDir(dir);
      expect(r.problems).toEqual([]);
      expect(r.version).toMatch(/^1\.0\.0\+[0-9a-f]{12}$/);
    });

    const { cases, problems } = loadFixtures(dir);
    it('has readable fixtures', () => {
      expect(problems).toEqual([]);
      expect(cases.length).toBeGreaterThanOrEqual(15);
    });

    const mappers = new Map<string, Promise<Mapper>>();
    const mapperFor = (o: MapperOptions): Promise<Mapper> => {
      const key = JSON.stringify(o);
      if (!mappers.has(key)) mappers.set(key, loadMapper(dir, o));
      return mappers.get(key)!;
    };
    for (const c of cases) {
      it(`fixture ${c.name}`, async () => {
        const r = await runFixture(c, mapperFor);
        expect(r.diffs).toEqual([]);
        expect(r.ok).toBe(true);
      });
    }
  });
}
