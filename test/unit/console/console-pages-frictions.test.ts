/**
 * Issue 43's operator frictions on the console pages: a red "2 exceptions" pill on a run whose
 * totals tie (they were loans boarded with review items), and no favicon (a 404 logged on every
 * first load).
 */
import { describe, expect, it } from 'vitest';
import { layout } from '../../../src/console/pages/layout.js';
import { exceptionPills } from '../../../src/console/pages/other.js';
import { keyValueLines } from '../../../src/console/pages/format.js';

describe('console pages: the frictions of a new operator', () => {
  it('a run whose only exceptions are loans boarded with review items shows no red pill', () => {
    const review = { reason: 'boarded_with_review_items', loanId: 'ln_1' };
    const shown = exceptionPills([review, { ...review, loanId: 'ln_2' }]).toString();
    expect(shown).toContain('<span class="pill ok">no exceptions</span>');
    expect(shown).toContain('<span class="pill warn">2 loans boarded with review items</span>');
    expect(shown).not.toContain('pill bad');
  });

  it('real exceptions stay red and are counted apart from review items', () => {
    const shown = exceptionPills([
      { reason: 'quarantined' },
      { reason: 'boarded_with_review_items' },
    ]).toString();
    expect(shown).toContain('<span class="pill bad">1 exception</span>');
    expect(shown).toContain('<span class="pill warn">1 loan boarded with review items</span>');
    expect(exceptionPills([]).toString()).toBe('<span class="pill ok">no exceptions</span>');
  });

  it('every page links the console icon', () => {
    const page = layout({ title: 'Log in', session: null, nav: 'none', body: '', flash: null }).toString();
    expect(page).toContain('<link rel="icon" href="/console/static/favicon.svg" type="image/svg+xml">');
  });

  it('an audit or history detail reads as key: value lines, nested keys dotted, never cut', () => {
    const long = 'x'.repeat(400);
    expect(
      keyValueLines({ day: '2026-11-25', result: { done: 12, failed: ['ln_1', 'ln_2'] }, note: long }),
    ).toEqual(['day: 2026-11-25', 'result.done: 12', 'result.failed: ln_1, ln_2', `note: ${long}`]);
  });
});
