import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { buildTieOut } from '../../../src/reports/compute.js';
import { formatCents, formatCentsGrouped } from '../../../src/reports/money.js';
import { createProgressBar } from '../../../src/reports/progress.js';
import { clockReading } from '../../support/fake-clock.js';
import { renderHtml } from '../../../src/reports/render-html.js';
import { escapeHtml } from '../../../src/lib/html.js';
import { renderJson } from '../../../src/reports/render-json.js';
import type {
  Amount,
  ControlTotals,
  ReconciliationSummary,
  ReportException,
} from '../../../src/reports/types.js';

const amt = (count: number, cents: number): Amount => ({ count, cents, unknownAmount: 0 });

function summary(exceptions: ReportException[]): ReconciliationSummary {
  const totals: ControlTotals = {
    released: amt(2, 300),
    pending: amt(0, 0),
    writtenAwaitingAck: amt(0, 0),
    acknowledged: amt(1, 100),
    quarantined: amt(1, 200),
    skipped: amt(0, 0),
    otherState: amt(0, 0),
    connectorWritten: amt(1, 100),
    writtenToCore: amt(1, 100),
    acknowledgedOnPlatform: amt(1, 100),
  };
  return {
    header: {
      runId: 'rec-1',
      asOf: '2026-11-20T18:00:00.000Z',
      asOfLocal: '2026-11-20 12:00:00 CST',
      timeZone: 'America/Chicago',
      connectorVersion: '0.1.0',
      mappingVersions: [{ version: '<v1>', loans: 1 }],
      environment: 'staging',
      platformOrigin: 'https://lender.example.com',
      coreAdapter: 'file',
      since: null,
      fundedNotReleasedDays: 5,
      ageBasis: 'business days',
    },
    totals,
    tieOut: buildTieOut(totals),
    aging: {
      byReason: { quarantined: { '0-1': 0, '2-5': 0, '>5': exceptions.length } },
      totals: { '0-1': 0, '2-5': 0, '>5': exceptions.length },
    },
    exceptionCount: exceptions.length,
    exceptionsByReason: exceptions.length ? { quarantined: exceptions.length } : {},
    notes: ['a <note>'],
  };
}

const ex: ReportException = {
  reason: 'quarantined',
  loanId: 'ln_"1"',
  loanNumber: '<script>alert(1)</script>',
  field: null,
  platformValue: null,
  coreValue: null,
  connectorState: 'quarantined',
  centsAmount: 200,
  since: null,
  ageBusinessDays: 9,
  ageBucket: '>5',
  detail: "it's <b>bad</b> & worse",
};

describe('money', () => {
  it('formats integer cents without float division', () => {
    expect(formatCents(125000050)).toBe('1250000.50');
    expect(formatCents(-5)).toBe('-0.05');
    expect(formatCents(0)).toBe('0.00');
    expect(formatCentsGrouped(125000050)).toBe('1,250,000.50');
    expect(formatCentsGrouped(-123456)).toBe('-1,234.56');
  });
});

describe('report.html', () => {
  it('escapes every value and loads nothing external', () => {
    const html = renderHtml(summary([ex]), [ex]);
    expect(html).not.toContain('<script>');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('it&#39;s &lt;b&gt;bad&lt;/b&gt; &amp; worse');
    expect(html).toContain('&lt;v1&gt;');
    expect(html).toContain('a &lt;note&gt;');
    expect(html).not.toMatch(/<link|<script|src=|url\(/i);
    expect(html).toContain('<svg');
    expect(html).toContain('Prepared by');
    expect(escapeHtml(`"'<>&`)).toBe('&quot;&#39;&lt;&gt;&amp;');
  });

  it('caps the exceptions table and points to the CSV', () => {
    const many = Array.from({ length: 12 }, (_, i) => ({ ...ex, loanId: `ln_${i}` }));
    const html = renderHtml(summary(many), many, { maxRows: 10 });
    expect(html).toContain('Showing the first 10 of 12');
    expect(html).not.toContain('ln_11');
  });
});

describe('report.json', () => {
  it('is valid JSON with or without exceptions', () => {
    const none = JSON.parse(renderJson(summary([]), []));
    expect(none.exceptions).toEqual([]);
    expect(none.schema).toMatch(/reconciliation-report@1$/);
    const one = JSON.parse(renderJson(summary([ex, ex]), [ex, ex]));
    expect(one.exceptions).toHaveLength(2);
    expect(one.exceptions[0].loanNumber).toBe('<script>alert(1)</script>');
    expect(one.reasons.quarantined.action).toMatch(/loans retry/);
    expect(one.tieOut[0].ties).toBe(true);
  });
});

describe('progress bar', () => {
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
    stream.columns = 100;
    return { stream, text: () => text };
  }

  it('draws one updating line on a TTY and clears it when done', () => {
    const s = sink(true);
    let t = 0;
    const bar = createProgressBar(
      s.stream,
      clockReading(() => (t += 200)),
    );
    bar.update({ phase: 'store', done: 50, total: 100 });
    bar.update({ phase: 'platform', done: 300, total: null });
    bar.done();
    expect(s.text()).toContain(' 50% reading connector state 50/100');
    expect(s.text()).toContain('walking platform (boarded) 300 loans');
    expect(s.text().endsWith('\r\x1b[2K')).toBe(true);
    expect(s.text()).not.toContain('\n');
  });

  it('prints nothing when the stream is not a terminal', () => {
    const s = sink(false);
    const bar = createProgressBar(
      s.stream,
      clockReading(() => 0),
    );
    bar.update({ phase: 'store', done: 1, total: 2 });
    bar.done();
    expect(s.text()).toBe('');
  });
});
