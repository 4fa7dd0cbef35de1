import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { fakeLoan } from '../../support/fake-platform.js';
import { fakePipeline } from '../../support/fake-pipeline.js';

/** A pino logger whose JSON lines the test reads back. */
function capturedLogger(): {
  logger: pino.Logger;
  lines: () => Array<{ level: number; msg: string; alert?: string; resolved?: boolean }>;
} {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== ''),
      );
      cb();
    },
  });
  return {
    logger: pino({ level: 'info' }, sink),
    lines: () =>
      out.map((l) => JSON.parse(l) as { level: number; msg: string; alert?: string; resolved?: boolean }),
  };
}

describe('core outage alert', () => {
  it('regression: the core outage ALERT was logged on every pass (a drain tick each); now once a minute while it lasts, and its end once', async () => {
    const { logger, lines } = capturedLogger();
    const p = fakePipeline({ logger, maxAttempts: 1000 });
    for (let i = 1; i <= 12; i++) p.platform.add(fakeLoan(`L${i}`));
    p.core.faults = [{ kind: 'unavailable', times: 1000 }];
    const alerts = (): number => lines().filter((l) => l.alert === 'core.outage' && l.level === 50).length;

    expect((await p.runner.run({ reason: 'tick 1' })).coreOutage).toMatchObject({ failures: 3 });
    p.clock.set(p.clock.now() + 10_000);
    expect((await p.runner.run({ reason: 'tick 2' })).coreOutage).not.toBeNull();
    p.clock.set(p.clock.now() + 10_000);
    expect((await p.runner.run({ reason: 'tick 3' })).coreOutage).not.toBeNull();
    expect(alerts(), 'ALERT lines within the first minute').toBe(1);
    expect(lines().filter((l) => l.msg === 'core still unavailable; this pass stopped').length).toBe(2);

    p.clock.set(p.clock.now() + 61_000);
    expect((await p.runner.run({ reason: 'a minute later' })).coreOutage).not.toBeNull();
    expect(alerts(), 'a minute later: the ALERT again').toBe(2);

    p.core.faults = [];
    p.clock.set(p.clock.now() + 10 * 60_000);
    const s = await p.runner.run({ reason: 'the core is back' });
    expect(s.coreOutage).toBeNull();
    expect(s.acknowledged).toBeGreaterThan(0);
    expect(
      lines()
        .filter((l) => l.alert === 'core.outage' && l.resolved === true)
        .map((l) => l.msg),
    ).toEqual(['the core takes writes again: boarding resumed']);
  });
});
