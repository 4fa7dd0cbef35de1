import type { Request, Router } from 'express';
import { checkContract, route } from './pipeline.js';
import { dateArray, parseFineractDate } from './dates.js';
import { domainFail, unsupportedFail, validationFail } from './errors.js';
import type { SimClient, SimIdentifier, SimState } from './model.js';

/** ClientApiCollectionConstants.CLIENT_CREATE_REQUEST_DATA_PARAMETERS: anything else is refused (400). */
const CLIENT_PARAMS = new Set([
  'address',
  'officeId',
  'firstname',
  'middlename',
  'lastname',
  'fullname',
  'legalFormId',
  'externalId',
  'mobileNo',
  'emailAddress',
  'active',
  'activationDate',
  'dateFormat',
  'locale',
  'submittedOnDate',
  'dateOfBirth',
  'genderId',
  'clientTypeId',
  'clientClassificationId',
  'staffId',
  'savingsProductId',
  'isStaff',
  'clientNonPersonDetails',
  'datatables',
  'familyMembers',
  'groupId',
  'accountNo',
  'isAddressEnabled',
]);
/** ClientIdentifierCommandFromApiJsonDeserializer.SUPPORTED_PARAMETERS. */
const IDENTIFIER_PARAMS = new Set(['documentTypeId', 'documentKey', 'description', 'status']);

/** FromJsonHelper.checkForUnsupportedParameters: the first check of every command. */
export function checkUnsupported(body: Record<string, unknown>, allowed: Set<string>): void {
  const bad = Object.keys(body).filter((k) => !allowed.has(k));
  if (bad.length > 0) throw unsupportedFail(bad);
}

export function clientJson(s: SimState, c: SimClient): Record<string, unknown> {
  const office = s.offices.find((o) => o.id === c.officeId);
  return {
    id: c.id,
    accountNo: String(c.id).padStart(9, '0'),
    externalId: c.externalId,
    status: c.active
      ? { id: 300, code: 'clientStatusType.active', value: 'Active' }
      : { id: 100, code: 'clientStatusType.pending', value: 'Pending' },
    officeId: c.officeId,
    ...(office !== undefined ? { officeName: office.name } : {}),
    active: c.active,
    ...(c.activationDate !== undefined ? { activationDate: dateArray(c.activationDate) } : {}),
    legalForm: {
      id: c.legalFormId,
      code: c.legalFormId === 2 ? 'legalFormType.entity' : 'legalFormType.person',
      value: c.legalFormId === 2 ? 'ENTITY' : 'PERSON',
    },
    ...(c.firstname !== undefined ? { firstname: c.firstname } : {}),
    ...(c.lastname !== undefined ? { lastname: c.lastname } : {}),
    ...(c.fullname !== undefined ? { fullname: c.fullname } : {}),
    displayName: c.fullname ?? `${c.firstname ?? ''} ${c.lastname ?? ''}`.trim(),
  };
}

export function clientById(s: SimState, id: unknown): SimClient {
  const c = s.clients.find((x) => String(x.id) === String(id));
  if (!c)
    throw domainFail(
      404,
      'error.msg.client.id.invalid',
      `Client with identifier ${String(id)} does not exist`,
    );
  return c;
}

/**
 * A listing (`GET /clients`, `GET /loans`): offset and limit, and `?externalId=`, Fineract's
 * search on external_id (any characters: it is a query, not a path). Fineract's SQL compares it
 * with LIKE (`c.external_id like ?`), so `%` and `_` in the value are wildcards: an id holding
 * them matches other records too, as it would on a real Fineract.
 */
export function listing<T extends { externalId: string | null }>(
  all: T[],
  toJson: (x: T) => Record<string, unknown>,
): (req: Request) => { body: unknown } {
  const likePattern = (v: string): RegExp =>
    new RegExp(
      `^${[...v]
        .map((ch) => (ch === '%' ? '.*' : ch === '_' ? '.' : ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('')}$`,
      'si',
    );
  return (req) => {
    const offset = Number(req.query['offset'] ?? 0);
    const limit = Number(req.query['limit'] ?? 200);
    const eid = req.query['externalId'];
    const like = typeof eid === 'string' ? likePattern(eid) : null;
    const found = like !== null ? all.filter((x) => x.externalId !== null && like.test(x.externalId)) : all;
    return {
      body: {
        totalFilteredRecords: found.length,
        pageItems: found.slice(offset, offset + limit).map(toJson),
      },
    };
  };
}

/**
 * Client.validateActivationDate (fineract-core portfolio/client/domain/Client.java): not in the
 * future of the business date, not before the office opened.
 */
function activationErrors(s: SimState, b: Record<string, unknown>, officeOpened: string): string | undefined {
  if (b['active'] !== true) return undefined;
  const iso = parseFineractDate(b['activationDate'], String(b['dateFormat']));
  if (iso === null) return undefined;
  const business = s.businessDate();
  if (business !== null && iso > business)
    throw validationFail('client', [
      {
        parameterName: 'activationDate',
        code: 'in.the.future',
        message: 'Activation date cannot be in the future.',
      },
    ]);
  if (iso < officeOpened)
    throw domainFail(
      400,
      'error.msg.clients.activationDate.cannot.be.before.office.activation.date',
      'Client activation date cannot be a date before the office opening date.',
    );
  return iso;
}

function createClient(s: SimState) {
  return (req: Request) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    checkUnsupported(b, CLIENT_PARAMS);
    checkContract(s, 'createClient', b);
    const office = s.offices.find((o) => o.id === b['officeId']);
    if (office === undefined)
      throw domainFail(
        404,
        'error.msg.office.id.invalid',
        `Office with identifier ${String(b['officeId'])} does not exist`,
      );
    const activationDate = activationErrors(s, b, office.openingDate);
    const externalId = typeof b['externalId'] === 'string' ? b['externalId'] : null;
    if (externalId !== null && s.clients.some((c) => c.externalId === externalId))
      throw domainFail(
        403,
        'error.msg.client.duplicate.externalId',
        `Client with externalId \`${externalId}\` already exists`,
      );
    const c: SimClient = {
      id: s.newId(),
      externalId,
      officeId: office.id,
      legalFormId: b['legalFormId'] as number,
      active: b['active'] === true,
      ...(activationDate !== undefined ? { activationDate } : {}),
      body: b,
      ...(b['legalFormId'] === 2
        ? { fullname: b['fullname'] as string }
        : { firstname: b['firstname'] as string, lastname: b['lastname'] as string }),
    };
    s.clients.push(c);
    return { body: { officeId: office.id, clientId: c.id, resourceId: c.id } };
  };
}

const identifierJson = (i: SimIdentifier): Record<string, unknown> => ({
  id: i.id,
  clientId: i.clientId,
  documentType: { id: i.documentTypeId, name: `type ${i.documentTypeId}` },
  documentKey: i.documentKey,
  description: i.description ?? null,
  status: 'clientIdentifierStatusType.active',
});

function createIdentifier(s: SimState) {
  return (req: Request) => {
    const c = clientById(s, req.params['id']);
    const b = (req.body ?? {}) as Record<string, unknown>;
    checkUnsupported(b, IDENTIFIER_PARAMS);
    checkContract(s, 'createClientIdentifier', b);
    const typeId = b['documentTypeId'] as number;
    if (!s.identifierTypes.includes(typeId))
      throw domainFail(
        404,
        'error.msg.codevalue.id.invalid',
        `Code value with identifier ${typeId} does not exist`,
      );
    const key = b['documentKey'] as string;
    // One (document type, key) across ALL clients: m_client_identifier's unique key
    // (DuplicateClientIdentifierException → error.msg.clientIdentifier.identityKey.duplicate, 403).
    if (s.identifiers.some((i) => i.documentTypeId === typeId && i.documentKey === key))
      throw domainFail(
        403,
        'error.msg.clientIdentifier.identityKey.duplicate',
        `Client identifier of type ${typeId} with value of ${key} already exists.`,
      );
    if (s.identifiers.some((i) => i.clientId === c.id && i.documentTypeId === typeId))
      throw domainFail(
        403,
        'error.msg.clientIdentifier.type.duplicate',
        `Client ${c.id} already has an identifier of type ${typeId}`,
      );
    const i: SimIdentifier = {
      id: s.newId(),
      clientId: c.id,
      documentTypeId: typeId,
      documentKey: key,
      ...(typeof b['description'] === 'string' ? { description: b['description'] } : {}),
    };
    s.identifiers.push(i);
    return { body: { officeId: c.officeId, clientId: c.id, resourceId: i.id } };
  };
}

/**
 * Fineract's search (SearchApiResource, SearchReadPlatformServiceImpl): `GET /search?query=&resource=
 * clients,clientIdentifiers,...&exactMatch=`. Resources outside the list are ignored; without
 * exactMatch the query is a substring (`like %q%`). A client identifier hit carries the key as
 * entityName and its client as parentId/parentName — not the document type.
 */
function search(s: SimState) {
  return (req: Request) => {
    const query = typeof req.query['query'] === 'string' ? req.query['query'] : '';
    const resource =
      typeof req.query['resource'] === 'string'
        ? req.query['resource']
        : 'clients,clientIdentifiers,groups,loans,savings,shares';
    const resources = resource.split(',').map((x) => x.trim());
    const exact = req.query['exactMatch'] === 'true';
    const q = query.toLowerCase();
    const matches = (v: unknown): boolean =>
      typeof v === 'string' && (exact ? v.toLowerCase() === q : v.toLowerCase().includes(q));
    const out: Array<Record<string, unknown>> = [];
    if (resources.includes('clients'))
      for (const c of s.clients) {
        const j = clientJson(s, c);
        if ([j['accountNo'], j['displayName'], c.externalId].some(matches))
          out.push({
            entityId: c.id,
            entityAccountNo: j['accountNo'],
            entityExternalId: c.externalId,
            entityName: j['displayName'],
            entityType: 'CLIENT',
            parentId: c.officeId,
            parentName: j['officeName'] ?? null,
            entityStatus: j['status'],
          });
      }
    if (resources.includes('clientIdentifiers'))
      for (const i of s.identifiers) {
        if (!matches(i.documentKey)) continue;
        const j = clientJson(s, clientById(s, i.clientId));
        out.push({
          entityId: i.id,
          entityName: i.documentKey,
          entityType: 'CLIENTIDENTIFIER',
          parentId: i.clientId,
          parentName: j['displayName'],
          entityStatus: j['status'],
        });
      }
    return { body: out };
  };
}

export function clientRoutes(s: SimState, r: Router): void {
  r.get(
    '/offices/:id',
    route(s, 'getOffice', (req) => {
      const o = s.offices.find((x) => String(x.id) === req.params['id']);
      if (o === undefined)
        throw domainFail(
          404,
          'error.msg.office.id.invalid',
          `Office with identifier ${String(req.params['id'])} does not exist`,
        );
      return {
        body: {
          id: o.id,
          name: o.name,
          nameDecorated: o.name,
          openingDate: dateArray(o.openingDate),
          hierarchy: '.',
        },
      };
    }),
  );
  r.get(
    '/clients',
    route(
      s,
      'listClients',
      listing(s.clients, (c) => clientJson(s, c)),
    ),
  );
  r.get(
    '/clients/external-id/:eid',
    route(s, 'getClientByExternalId', (req) => {
      const c = s.clients.find((x) => x.externalId === req.params['eid']);
      if (!c)
        throw domainFail(
          404,
          'error.msg.client.id.invalid',
          `Client with identifier ${String(req.params['eid'])} does not exist`,
        );
      return { body: clientJson(s, c) };
    }),
  );
  r.get(
    '/clients/:id',
    route(s, 'getClient', (req) => ({ body: clientJson(s, clientById(s, req.params['id'])) })),
  );
  r.post('/clients', route(s, 'createClient', createClient(s), 'CREATE_CLIENT'));
  r.get(
    '/clients/:id/identifiers',
    route(s, 'listClientIdentifiers', (req) => {
      const c = clientById(s, req.params['id']);
      return { body: s.identifiers.filter((i) => i.clientId === c.id).map(identifierJson) };
    }),
  );
  r.post(
    '/clients/:id/identifiers',
    route(s, 'createClientIdentifier', createIdentifier(s), 'CREATE_CLIENTIDENTIFIER'),
  );
  r.get('/search', route(s, 'search', search(s)));
}
