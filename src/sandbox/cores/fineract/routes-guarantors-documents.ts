import { createHash } from 'node:crypto';
import type { Request, Router } from 'express';
import { Response as WebResponse } from 'undici';
import { checkContract, route } from './pipeline.js';
import { HttpFail, domainFail, envelope, parameterError, validationFail } from './errors.js';
import { checkUnsupported } from './routes-clients.js';
import { loanById } from './routes-loans.js';
import type { SimDocument, SimGuarantor, SimState } from './model.js';

/** GuarantorJSONinputParams + locale, dateFormat (GuarantorCommandFromApiJsonDeserializer). */
const GUARANTOR_PARAMS = new Set([
  'guarantorTypeId',
  'entityId',
  'firstname',
  'lastname',
  'clientRelationshipTypeId',
  'addressLine1',
  'addressLine2',
  'city',
  'state',
  'country',
  'zip',
  'housePhoneNumber',
  'mobileNumber',
  'comment',
  'dob',
  'dateFormat',
  'locale',
  'savingsId',
  'amount',
]);

/** Fineract's document whitelist (FileSystemContentPathSanitizer): extension → accepted content types. */
const DOCUMENT_TYPES: Record<string, string[]> = {
  pdf: ['application/pdf'],
  doc: ['application/msword'],
  docx: ['application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
  xls: ['application/vnd.ms-excel'],
  xlsx: ['application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
  jpg: ['image/jpeg'],
  jpeg: ['image/jpeg'],
  png: ['image/png'],
};

function createGuarantor(s: SimState) {
  return (req: Request) => {
    const l = loanById(s, req.params['id']);
    const b = (req.body ?? {}) as Record<string, unknown>;
    checkUnsupported(b, GUARANTOR_PARAMS);
    checkContract(s, 'createGuarantor', b);
    const typeId = b['guarantorTypeId'] as number;
    let entityId: number | null = null;
    if (typeId === 1) {
      const c = s.clients.find((x) => x.id === b['entityId']);
      if (!c)
        throw domainFail(
          404,
          'error.msg.client.id.invalid',
          `Client with identifier ${String(b['entityId'])} does not exist`,
        );
      if (c.id === l.clientId)
        throw domainFail(
          403,
          'error.msg.loan.guarantor.self.guarantee.error',
          'Loan applicant cannot be a guarantor of their own loan.',
        );
      entityId = c.id;
      if (s.guarantors.some((g) => g.loanId === l.id && g.entityId === entityId))
        throw domainFail(
          403,
          'error.msg.loan.guarantor.duplicate',
          `Client ${entityId} is already a guarantor of loan ${l.id}`,
        );
    }
    const g: SimGuarantor = {
      id: s.newId(),
      loanId: l.id,
      guarantorTypeId: typeId,
      entityId,
      ...(typeof b['firstname'] === 'string' ? { firstname: b['firstname'] } : {}),
      ...(typeof b['lastname'] === 'string' ? { lastname: b['lastname'] } : {}),
    };
    s.guarantors.push(g);
    return { body: { officeId: 1, clientId: l.clientId, loanId: l.id, resourceId: g.id } };
  };
}

function guarantorJson(g: SimGuarantor): Record<string, unknown> {
  return {
    id: g.id,
    loanId: g.loanId,
    guarantorType: {
      id: g.guarantorTypeId,
      code: g.guarantorTypeId === 1 ? 'guarantor.existing.customer' : 'guarantor.external',
      value: g.guarantorTypeId === 1 ? 'CUSTOMER' : 'EXTERNAL',
    },
    entityId: g.entityId,
    firstname: g.firstname ?? null,
    lastname: g.lastname ?? null,
    status: true,
  };
}

/**
 * Multipart upload (DocumentManagementApiResource.createDocument): outside the command pipeline,
 * so no idempotency; permission CREATE_DOCUMENT; the published DocumentUploadRequest and
 * DocumentCommandValidator (contract.ts), then the content whitelist and the size cap (403).
 */
function createDocument(s: SimState) {
  return async (req: Request) => {
    const l = loanById(s, req.params['id']);
    if (s.denied.has('CREATE_DOCUMENT'))
      throw new HttpFail(
        403,
        envelope(403, 'error.msg.not.authorized', 'Insufficient privileges to perform this action.', [
          parameterError('error.msg.not.authorized', 'User has no authority to: CREATE_DOCUMENT', 'id'),
        ]),
      );
    if (!Buffer.isBuffer(req.body))
      throw validationFail('document', [
        {
          parameterName: 'file',
          code: 'cannot.be.blank',
          message: 'A multipart/form-data body with a file is required.',
        },
      ]);
    const form = await new WebResponse(req.body, {
      headers: { 'content-type': req.header('content-type') ?? '' },
    }).formData();
    const name = form.get('name');
    const description = form.get('description');
    const file = form.get('file');
    if (file === null || typeof file === 'string')
      throw validationFail('document', [
        { parameterName: 'file', code: 'cannot.be.blank', message: 'The parameter `file` is mandatory.' },
      ]);
    const bytes = Buffer.from(await file.arrayBuffer());
    checkContract(s, 'createDocument', {
      name: typeof name === 'string' ? name : undefined,
      description: typeof description === 'string' ? description : undefined,
      fileName: file.name,
      size: bytes.length,
    });
    const ext = /\.([A-Za-z0-9]+)$/.exec(file.name)?.[1]?.toLowerCase();
    const types = ext === undefined ? undefined : DOCUMENT_TYPES[ext];
    const contentType = file.type.split(';')[0]?.trim().toLowerCase() ?? '';
    if (types === undefined || !types.includes(contentType))
      throw domainFail(
        403,
        'error.msg.document.save',
        `Invalid file extension or content type: ${file.name} (${file.type || 'no content type'})`,
      );
    if (bytes.length > s.documentMaxBytes)
      throw domainFail(
        403,
        'error.msg.document.save',
        `Document size ${bytes.length} exceeds the limit of ${s.documentMaxBytes} bytes`,
      );
    const d: SimDocument = {
      id: s.newId(),
      loanId: l.id,
      name: name as string,
      description: typeof description === 'string' ? description : '',
      fileName: file.name,
      type: file.type,
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    };
    s.documents.push(d);
    return { body: { resourceId: d.id, resourceIdentifier: String(d.id) } };
  };
}

export function guarantorAndDocumentRoutes(s: SimState, r: Router): void {
  r.get(
    '/loans/:id/guarantors',
    route(s, 'listGuarantors', (req) => {
      const l = loanById(s, req.params['id']);
      return { body: s.guarantors.filter((g) => g.loanId === l.id).map(guarantorJson) };
    }),
  );
  r.post('/loans/:id/guarantors', route(s, 'createGuarantor', createGuarantor(s), 'CREATE_GUARANTOR'));
  r.get(
    '/loans/:id/documents',
    route(s, 'listDocuments', (req) => {
      const l = loanById(s, req.params['id']);
      return {
        body: s.documents
          .filter((d) => d.loanId === l.id)
          .map((d) => ({
            id: d.id,
            parentEntityType: 'loans',
            parentEntityId: d.loanId,
            name: d.name,
            fileName: d.fileName,
            size: d.size,
            type: d.type,
            description: d.description,
          })),
      };
    }),
  );
  r.post('/loans/:id/documents', route(s, 'createDocument', createDocument(s)));
}
