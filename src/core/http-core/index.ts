/**
 * The HTTP-core skeleton (docs/core.md "Writing a fourth HTTP core"): what Fineract, Mambu and any
 * other core reached over HTTP share — the client and its failure classification (client.ts), the
 * look-up-before-create loop (create-once.ts), the document flow (documents.ts) and the board
 * itself with its receipt (skeleton.ts).
 */
export * from './client.js';
export * from './create-once.js';
export * from './documents.js';
export * from './skeleton.js';
