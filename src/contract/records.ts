/**
 * One record for the core: what the mapping engine produces and the core adapters (and the file
 * core's layouts) consume, so it lives here, below both. `type` is the mapping's target name (e.g.
 * customer, loan, relationship, document for the generic set; client, loan, guarantor, document
 * for fineract). `externalId` is the platform id the record is idempotent by. Records reference
 * each other by external id in fields named `*ExternalId` (e.g. a fineract loan's
 * `clientExternalId`); the core adapter resolves those to core ids.
 */
export interface MappedRecord {
  type: string;
  externalId: string;
  fields: Record<string, unknown>;
}
