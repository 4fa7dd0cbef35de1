import { describe, expect, it } from 'vitest';
import { PREVIEWS_PER_MINUTE, PreviewThrottle } from '../../../src/ops/preview-throttle.js';

describe('PreviewThrottle: board and re-board checks spend platform reads', () => {
  it('runs one check at a time, whoever asks', () => {
    const t = new PreviewThrottle();
    const a = t.start('olga', 0);
    expect(a.ok).toBe(true);
    expect(t.start('piet', 1)).toEqual({ ok: false, why: 'busy' });
    if (a.ok) a.done();
    expect(t.start('piet', 2).ok).toBe(true);
  });

  it('lets each user start PREVIEWS_PER_MINUTE a minute, says how long to wait, and counts users apart', () => {
    const t = new PreviewThrottle();
    for (let i = 0; i < PREVIEWS_PER_MINUTE; i++) {
      const s = t.start('olga', 1_000 + i * 1_000);
      expect(s.ok).toBe(true);
      if (s.ok) s.done();
    }
    // The first of those started at 1 s: the window frees at 61 s.
    expect(t.start('olga', 10_500)).toEqual({
      ok: false,
      why: 'rate',
      perMinute: PREVIEWS_PER_MINUTE,
      waitS: 51,
    });
    const other = t.start('piet', 10_500);
    expect(other.ok).toBe(true);
    if (other.ok) other.done();
    expect(t.start('olga', 61_001).ok).toBe(true);
  });

  it('a refused start leaves no trace (it is not counted, nothing is marked running)', () => {
    const t = new PreviewThrottle(1);
    const a = t.start('olga', 0);
    if (a.ok) a.done();
    expect(t.start('olga', 1).ok).toBe(false);
    expect(t.start('olga', 2).ok).toBe(false);
    // Still one start in the window, from t=0: free again at 60 s.
    expect(t.start('olga', 60_001).ok).toBe(true);
  });
});
