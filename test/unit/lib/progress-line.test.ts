import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createProgressLine, progressEnabled } from '../../../src/lib/terminal.js';
import { describeWait } from '../../../src/cli/progress.js';
import { FakeClock } from '../../support/fake-clock.js';

function sink(isTTY: boolean): {
  stream: Writable & { isTTY?: boolean; columns?: number };
  text: () => string;
} {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  }) as Writable & { isTTY?: boolean; columns?: number };
  stream.isTTY = isTTY;
  stream.columns = 120;
  return { stream, text: () => text };
}

describe('progress line', () => {
  it('auto shows on a terminal only; always shows anywhere; never nowhere', () => {
    expect(progressEnabled('auto', { isTTY: true })).toBe(true);
    expect(progressEnabled('auto', { isTTY: false })).toBe(false);
    expect(progressEnabled('always', {})).toBe(true);
    expect(progressEnabled('never', { isTTY: true })).toBe(false);
  });

  it('on a terminal: redrawn in place with the wait reason beside the status, cleared for results and at the end', () => {
    const s = sink(true);
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const t = clock.now();
    const line = createProgressLine(s.stream, { mode: 'auto', clock, minIntervalMs: 0 });
    line.status('boarding 3/28');
    line.wait(
      (ms) => describeWait({ kind: 'budget', bucket: 'read', reason: 'window', until: t + 12_000 }, ms),
      t + 12_000,
    );
    expect(s.text()).toContain('\r\x1b[2Kboarding 3/28 · waiting 12 s for the read budget');
    let wrote = false;
    line.around(() => {
      wrote = true;
      expect(s.text().endsWith('\r\x1b[2K')).toBe(true);
    });
    expect(wrote).toBe(true);
    clock.set(t + 12_001);
    line.status('boarding 4/28');
    expect(s.text().endsWith('\r\x1b[2Kboarding 4/28')).toBe(true);
    line.done();
    expect(s.text().endsWith('\r\x1b[2K')).toBe(true);
    expect(s.text()).not.toContain('\n');
  });

  it('into a file (--progress=always): one line per change, a 429 pause with its end time, no control sequences', () => {
    const s = sink(false);
    const clock = new FakeClock({ start: Date.parse('2026-11-25T21:40:00Z') });
    const t = clock.now();
    const line = createProgressLine(s.stream, { mode: 'always', clock, minIntervalMs: 0 });
    line.status('walking the boarding queue');
    const until = t + 75_000;
    line.wait((ms) => describeWait({ kind: 'paused', bucket: 'write', until }, ms), until);
    line.resume();
    line.status('boarding 1/2');
    line.done();
    expect(s.text()).toBe(
      [
        'walking the boarding queue',
        'walking the boarding queue · paused after a 429 until 21:41:15Z (75 s, writes)',
        'walking the boarding queue',
        'boarding 1/2',
        '',
      ].join('\n'),
    );
  });

  it('never: nothing at all, and writes of results pass through', () => {
    const s = sink(true);
    const clock = new FakeClock();
    const line = createProgressLine(s.stream, { mode: 'never', clock });
    line.status('boarding 1/2');
    line.wait(() => 'waiting', clock.now() + 5000);
    let wrote = false;
    line.around(() => (wrote = true));
    line.done();
    expect(wrote).toBe(true);
    expect(s.text()).toBe('');
  });
});

describe('progress line time', () => {
  it('counts a wait down on the injected clock, and stops when it is over (regression: it read Date.now())', async () => {
    const s = sink(true);
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const until = clock.now() + 3000;
    const line = createProgressLine(s.stream, { mode: 'auto', clock, minIntervalMs: 0 });
    line.status('boarding 1/2');
    line.wait((ms) => describeWait({ kind: 'budget', bucket: 'read', reason: 'window', until }, ms), until);
    expect(s.text()).toContain('waiting 3 s for the read budget');
    await clock.advance(1000);
    expect(s.text().endsWith('boarding 1/2 · waiting 2 s for the read budget')).toBe(true);
    await clock.advance(2000);
    expect(s.text().endsWith('\r\x1b[2Kboarding 1/2')).toBe(true);
    const drawn = s.text();
    await clock.advance(5000);
    expect(s.text()).toBe(drawn);
    line.done();
  });
});

describe('progress line on a narrow terminal', () => {
  it('cuts the status, not the wait reason', () => {
    const s = sink(true);
    s.stream.columns = 60;
    const clock = new FakeClock({ start: 1_800_000_000_000 });
    const t = clock.now();
    const line = createProgressLine(s.stream, { mode: 'auto', clock, minIntervalMs: 0 });
    line.status('dry run: reading and mapping 2/5: loan ln_wyya46wvqa_with_a_long_id');
    line.wait(
      (ms) => describeWait({ kind: 'budget', bucket: 'read', reason: 'window', until: t + 2000 }, ms),
      t + 2000,
    );
    const last = s.text().split('\r\x1b[2K').at(-1) as string;
    expect(last.endsWith(' · waiting 2 s for the read budget')).toBe(true);
    expect(last.length).toBe(59);
    expect(last).toContain('…');
  });
});
