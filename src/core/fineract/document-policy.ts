import type { PlatformDocument } from '../../contract/schemas.js';

/** What to do with a document Fineract would refuse: leave it out with a warning, or stop the loan. */
export type RefusedDocumentAction = 'skip' | 'quarantine';

export interface FineractDocumentPolicy {
  /** Fineract's upload cap (ContentRepository default 5 MiB). */
  maxBytes: number;
  /** Default for a refused document. */
  refused: RefusedDocumentAction;
  /** Per file type (extension such as `csv`, or content type such as `text/plain`). */
  refusedByType: Readonly<Record<string, RefusedDocumentAction>>;
}

export const DEFAULT_DOCUMENT_POLICY: FineractDocumentPolicy = {
  maxBytes: 5 * 1024 * 1024,
  refused: 'skip',
  refusedByType: {},
};

/** Fineract's whitelist (FileSystemContentPathSanitizer): extension → the content types it accepts. */
const WHITELIST: Readonly<Record<string, string>> = {
  pdf: 'application/pdf',
  doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  png: 'image/png',
};
const EXTENSION_OF: Readonly<Record<string, string>> = {
  'application/pdf': 'pdf',
  'application/msword': 'doc',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/vnd.ms-excel': 'xls',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'xlsx',
  'image/jpeg': 'jpg',
  'image/jpg': 'jpg',
  'image/png': 'png',
};

export type DocumentPlan =
  | { upload: true; extension: string; contentType: string }
  | { upload: false; action: RefusedDocumentAction; reason: string };

function extensionOf(name: string | null | undefined): string | undefined {
  const m = /\.([A-Za-z0-9]{1,10})$/.exec(name ?? '');
  return m?.[1]?.toLowerCase();
}

function mediaType(type: string | null | undefined): string | undefined {
  const t = type?.split(';')[0]?.trim().toLowerCase();
  return t === undefined || t === '' ? undefined : t;
}

/**
 * Decides, before anything is written, how a document goes to Fineract. Fineract checks the
 * file name's extension and the content type together, so the upload is named after what the
 * document is: a PDF named `statement` (or `statement.PDF.bin`) is uploaded as `statement.pdf`.
 * A document of another type, or over the cap, is refused by the bank's policy for its type.
 */
export function planDocument(doc: PlatformDocument, policy: FineractDocumentPolicy): DocumentPlan {
  const fromType = mediaType(doc.type);
  const fromName = extensionOf(doc.name);
  const refuse = (reason: string): DocumentPlan => ({
    upload: false,
    action:
      (fromName !== undefined ? policy.refusedByType[fromName] : undefined) ??
      (fromType !== undefined ? policy.refusedByType[fromType] : undefined) ??
      policy.refused,
    reason,
  });
  // DocumentCommandValidator.validateForCreate: size integerGreaterThanZero (400 after the loan exists).
  if (doc.size === 0)
    return refuse(
      `document ${doc.id} is empty (0 bytes); Fineract refuses an empty upload (size must be > 0)`,
    );
  if (typeof doc.size === 'number' && doc.size > policy.maxBytes) {
    return refuse(
      `document ${doc.id} is ${doc.size} bytes, over Fineract's upload ` +
        `cap of ${policy.maxBytes} (core.http.documents.maxBytes)`,
    );
  }
  if (fromType !== undefined) {
    const ext = EXTENSION_OF[fromType];
    if (ext !== undefined)
      return {
        upload: true,
        extension: fromName !== undefined && WHITELIST[fromName] === WHITELIST[ext] ? fromName : ext,
        contentType: WHITELIST[ext] as string,
      };
    return refuse(
      `document ${doc.id} is ${fromType}; Fineract accepts only pdf, doc, docx, xls, xlsx, jpg, jpeg and png`,
    );
  }
  if (fromName !== undefined && WHITELIST[fromName] !== undefined)
    return { upload: true, extension: fromName, contentType: WHITELIST[fromName] };
  return refuse(
    `document ${doc.id} has no content type and ` +
      `${fromName === undefined ? 'no file extension' : `the extension .${fromName}`}; ` +
      `Fineract accepts only pdf, doc, docx, xls, xlsx, jpg, jpeg and png`,
  );
}

/** The upload's file name: the safe base name with the extension Fineract will accept. */
export function uploadFileName(safeName: string, extension: string): string {
  const base = safeName.replace(/\.[A-Za-z0-9]{1,10}$/, '') || 'document';
  return `${base.slice(0, 200)}.${extension}`;
}
