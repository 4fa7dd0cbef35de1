import { describe, expect, it } from 'vitest';
import { Html, consoleHref, html, joinHtml, seg } from '../../../src/console/pages/html.js';

describe('console pages: the html`` template', () => {
  it('escapes every interpolated string: hostile names reach the page as text', () => {
    const name = `<script>alert("x")</script> O'Brien & Sons`;
    const out = html`<td title="${name}">${name}</td>`.toString();
    expect(out).toBe(
      '<td title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; O&#39;Brien &amp; Sons">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; O&#39;Brien &amp; Sons</td>',
    );
  });

  it('inserts nested html`` as is, arrays joined, null/undefined/false as nothing, numbers as text', () => {
    const rows = ['a<b', 'c'].map((v) => html`<li>${v}</li>`);
    expect(html`<ul>${rows}</ul>${null}${undefined}${false}${0}`.toString()).toBe(
      '<ul><li>a&lt;b</li><li>c</li></ul>0',
    );
    expect(joinHtml([html`<b>x</b>`, '<i>'], ', ').toString()).toBe('<b>x</b>, &lt;i&gt;');
  });

  it('cannot be minted from a plain string outside the module', () => {
    expect(() => new Html(Symbol('html') as never, '<b>')).toThrow(/html`` tag only/);
  });

  it('links stay inside /console/, path segments and query values are encoded', () => {
    expect(consoleHref(`/console/loans/${seg('a/b?c#d')}`)).toBe('/console/loans/a%2Fb%3Fc%23d');
    expect(consoleHref('/console/queue', { state: 'quarantined', reason: '', page: 2, x: null })).toBe(
      '/console/queue?state=quarantined&page=2',
    );
    expect(() => consoleHref('javascript:alert(1)')).toThrow(/outside/);
    expect(() => consoleHref('//evil.example/console/')).toThrow(/outside/);
  });
});
