import type { Mapper, MappingInput, MappingIssue, MappingOutcome } from '../../src/mapping/types.js';

/** Maps every loan to one loan record + one customer per business; `fail` decides which loans fail. */
export class FakeMapper implements Mapper {
  readonly name = 'fake';
  version = 'v1';
  calls = 0;
  fail: (input: MappingInput) => MappingIssue[] | null = () => null;
  /** Review items (warnings) a loan maps with; it still boards. */
  warn: (input: MappingInput) => MappingIssue[] | null = () => null;

  async map(input: MappingInput): Promise<MappingOutcome> {
    this.calls += 1;
    await Promise.resolve();
    const issues = this.fail(input);
    if (issues && issues.length > 0) return { ok: false, mappingVersion: this.version, issues };
    const warnings = this.warn(input);
    return {
      ok: true,
      mappingVersion: this.version,
      ...(warnings && warnings.length > 0 ? { warnings } : {}),
      records: [
        ...input.entities.businesses.map((b) => ({
          type: 'customer',
          externalId: b.id,
          fields: { name: b.name },
        })),
        { type: 'loan', externalId: input.loan.id, fields: { principal: input.loan.centsAmount } },
      ],
    };
  }
}

export function issue(code: MappingIssue['code'], message: string): MappingIssue {
  return { code, file: 'loan.yaml', line: 3, column: 5, target: 'loan', field: 'principal', message };
}
