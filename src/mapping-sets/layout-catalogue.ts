import type { LayoutRecordCatalogue } from '../core/file/layout/layout.js';
import type { CompiledMapping } from '../mapping/compile.js';
import { idIntoFixedColumnMessage, idReadByColumn } from '../mapping/id-flow.js';

/**
 * What a mapping set tells the lint of its `layout.yaml` (core/file/layout): the fields of each
 * record type with their `maxLength`, and where a fixed-width column would carry a platform id.
 * Without a compiled mapping only the loan id (source: loanId) is known, and fields are not checked.
 */
export function layoutCatalogue(mapping: CompiledMapping | undefined): LayoutRecordCatalogue {
  let fields: Map<string, Map<string, number | undefined>> | undefined;
  if (mapping) {
    fields = new Map();
    for (const t of mapping.targets) {
      const m = fields.get(t.type) ?? new Map<string, number | undefined>();
      for (const f of t.fields) m.set(f.name, f.check.maxLength ?? m.get(f.name));
      fields.set(t.type, m);
    }
  }
  return {
    fields,
    idIntoFixedColumn(file, record, column) {
      const read = idReadByColumn(mapping, record, {
        ...(column.source !== undefined ? { source: column.source } : {}),
        ...(column.field !== undefined ? { field: column.field } : {}),
      });
      return read ? idIntoFixedColumnMessage(file, column.name, column.length, read) : undefined;
    },
  };
}
