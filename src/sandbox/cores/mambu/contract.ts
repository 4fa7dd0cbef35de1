import { z } from 'zod';

/**
 * Mambu API v2 as Mambu publishes it: one zod schema per request and answer of every operation the
 * adapter (src/core/mambu) uses. Written from Mambu's published OpenAPI documents — one per API v2
 * endpoint group, served as `swagger_files/v2/<api>.json` (`openapi: 3.0.1`, `info.version: v2`) —
 * and their schema pages on docs.mambu.com (`/api/api-v2/<api>/schemas/<schema>/`); each operation
 * below names its API, schema and page. Facts carried over: property names, types and formats
 * (`string<date-time>` is a date-time WITH an offset, e.g. `2016-09-06T13:37:50+03:00`;
 * `integer<int32>`; `number`), enums, required. Rules Mambu states in prose but not in a schema are
 * enforced by the simulator (simulator.ts), each citing its page.
 *
 * Requests are strict: a property the published schema does not have is refused (Mambu answers
 * INVALID_PARAMETERS), except custom field sets (`_<setId>`: { fieldId: value }), which Mambu models
 * as extra properties. Answers are strict too, so the simulator can only answer with Mambu's names
 * and the adapter can only read Mambu's names.
 */

/** `string<date-time>`: an instant with Z or ±hh:mm, never a bare day. */
export const dateTime = z.iso.datetime({ offset: true, error: 'expected a date-time with an offset' });
/** `string<date>` (a birth date, a document's validUntil). */
export const date = z.iso.date({ error: 'expected a date (YYYY-MM-DD)' });
const int32 = z.int32();
const int64 = z.int();
const str = z.string();

/** A custom field set's values: field id → a scalar (Mambu's "custom field values" page). */
const customFieldSet = z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]));

/**
 * An entity with custom field sets: the published properties, plus `_<setId>` objects; any other
 * property is refused by name.
 */
function withCustomFields<S extends z.core.$ZodLooseShape>(shape: S) {
  return z
    .object(shape)
    .catchall(customFieldSet)
    .superRefine((v, ctx) => {
      for (const k of Object.keys(v))
        if (!(k in shape) && !k.startsWith('_'))
          ctx.addIssue({ code: 'custom', path: [k], message: 'not a property of the published schema' });
    });
}

// --- shared shapes -------------------------------------------------------------------------------

/** clients API, schema Address (docs.mambu.com/api/api-v2/clients/schemas/client/ → addresses). */
const address = z.strictObject({
  city: str.optional(),
  country: str.optional(),
  encodedKey: str.optional(),
  indexInList: int32.optional(),
  latitude: z.number().optional(),
  line1: str.optional(),
  line2: str.optional(),
  longitude: z.number().optional(),
  parentKey: str.optional(),
  postcode: str.optional(),
  region: str.optional(),
});

/** clients API, schema IdentificationDocument (docs.mambu.com/api/api-v2/clients/schemas/identificationdocument/). */
const identificationDocument = z.strictObject({
  clientKey: str.optional(),
  documentId: str,
  documentType: str,
  encodedKey: str.optional(),
  identificationDocumentTemplateKey: str.optional(),
  indexInList: int32.optional(),
  issuingAuthority: str.optional(),
  validUntil: date.optional(),
});

const clientState = z.enum(['PENDING_APPROVAL', 'INACTIVE', 'ACTIVE', 'EXITED', 'BLACKLISTED', 'REJECTED']);

/**
 * clients API (v2), schema Client (docs.mambu.com/api/api-v2/clients/schemas/client/): required
 * firstName, lastName.
 */
const clientShape = {
  id: str.optional(),
  firstName: str,
  lastName: str,
  middleName: str.optional(),
  birthDate: date.optional(),
  gender: z.enum(['MALE', 'FEMALE']).optional(),
  emailAddress: str.optional(),
  mobilePhone: str.optional(),
  homePhone: str.optional(),
  preferredLanguage: str.optional(),
  notes: str.optional(),
  addresses: z.array(address).optional(),
  idDocuments: z.array(identificationDocument).optional(),
  assignedBranchKey: str.optional(),
  assignedCentreKey: str.optional(),
  assignedUserKey: str.optional(),
  clientRoleKey: str.optional(),
  state: clientState.optional(),
};
export const clientRequest = withCustomFields(clientShape);
export const clientResponse = withCustomFields({
  ...clientShape,
  id: str,
  encodedKey: str,
  state: clientState,
  creationDate: dateTime.optional(),
  lastModifiedDate: dateTime.optional(),
});

/** groups API (v2), schema GroupMember (docs.mambu.com/api/api-v2/groups/schemas/groupmember/): clientKey required. */
const groupMember = z.strictObject({
  clientKey: str,
  roles: z
    .array(
      z.strictObject({
        encodedKey: str.optional(),
        groupRoleNameKey: str,
        roleName: str.optional(),
        roleNameId: str.optional(),
      }),
    )
    .optional(),
});

/** groups API (v2), schema Group (docs.mambu.com/api/api-v2/groups/schemas/group/): groupName required. */
const groupShape = {
  id: str.optional(),
  groupName: str,
  groupMembers: z.array(groupMember).optional(),
  groupRoleKey: str.optional(),
  assignedBranchKey: str.optional(),
  assignedCentreKey: str.optional(),
  assignedUserKey: str.optional(),
  emailAddress: str.optional(),
  mobilePhone: str.optional(),
  homePhone: str.optional(),
  notes: str.optional(),
  preferredLanguage: str.optional(),
  addresses: z.array(address).optional(),
};
export const groupRequest = withCustomFields(groupShape);
export const groupResponse = withCustomFields({
  ...groupShape,
  id: str,
  encodedKey: str,
  creationDate: dateTime.optional(),
  lastModifiedDate: dateTime.optional(),
});

export const REPAYMENT_PERIOD_UNITS = ['DAYS', 'WEEKS', 'MONTHS', 'YEARS'] as const;
export const GRACE_PERIOD_TYPES = ['NONE', 'PAY_INTEREST_ONLY', 'INTEREST_FORGIVENESS'] as const;
export const ACCOUNT_STATES = [
  'PARTIAL_APPLICATION',
  'PENDING_APPROVAL',
  'APPROVED',
  'ACTIVE',
  'ACTIVE_IN_ARREARS',
  'CLOSED',
  'CLOSED_WRITTEN_OFF',
  'CLOSED_REJECTED',
] as const;

/** loans API (v2), schema ScheduleSettings (Loanaccount → scheduleSettings): gracePeriod required, int32. */
const scheduleSettings = z.strictObject({
  gracePeriod: int32,
  gracePeriodType: z.enum(GRACE_PERIOD_TYPES).optional(),
  repaymentInstallments: int32.optional(),
  repaymentPeriodCount: int32.optional(),
  repaymentPeriodUnit: z.enum(REPAYMENT_PERIOD_UNITS).optional(),
  fixedDaysOfMonth: z.array(int32).optional(),
  periodicPayment: z.number().optional(),
  scheduleDueDatesMethod: z.enum(['INTERVAL', 'FIXED_DAYS_OF_MONTH']).optional(),
  defaultFirstRepaymentDueDateOffset: int32.optional(),
});

/** loans API (v2), schema InterestSettings (Loanaccount → interestSettings). */
const interestSettings = z.strictObject({
  interestRate: z.number().optional(),
  interestSpread: z.number().optional(),
  interestRateSource: z.enum(['FIXED_INTEREST_RATE', 'INDEX_INTEREST_RATE']).optional(),
});

/** loans API (v2), schema CustomPredefinedFee (disbursementDetails → fees). */
const customPredefinedFee = z.strictObject({
  amount: z.number().optional(),
  encodedKey: str.optional(),
  percentage: z.number().optional(),
  predefinedFeeEncodedKey: str.optional(),
});

/**
 * loans API (v2), schema DisbursementDetails (docs.mambu.com/api/api-v2/loans/schemas/disbursementdetails/):
 * expectedDisbursementDate and firstRepaymentDate are `string<date-time>`, "Stored as Organization Time".
 */
const disbursementDetails = z.strictObject({
  disbursementDate: dateTime.optional(),
  encodedKey: str.optional(),
  expectedDisbursementDate: dateTime.optional(),
  firstRepaymentDate: dateTime.optional(),
  fees: z.array(customPredefinedFee).optional(),
});

/**
 * loans API (v2), schema LoanAccount (docs.mambu.com/api/api-v2/loans/schemas/loanaccount/):
 * required accountHolderKey, accountHolderType (CLIENT | GROUP), loanAmount, productTypeKey.
 */
const loanShape = {
  id: str.optional(),
  accountHolderKey: str,
  accountHolderType: z.enum(['CLIENT', 'GROUP']),
  productTypeKey: str,
  loanAmount: z.number(),
  loanName: str.optional(),
  notes: str.optional(),
  scheduleSettings: scheduleSettings.optional(),
  interestSettings: interestSettings.optional(),
  disbursementDetails: disbursementDetails.optional(),
  assignedBranchKey: str.optional(),
  assignedCentreKey: str.optional(),
  assignedUserKey: str.optional(),
  arrearsTolerancePeriod: int32.optional(),
};
export const loanRequest = withCustomFields(loanShape);
export const loanResponse = withCustomFields({
  ...loanShape,
  id: str,
  encodedKey: str,
  accountState: z.enum(ACCOUNT_STATES),
  creationDate: dateTime.optional(),
  approvedDate: dateTime.optional(),
  lastModifiedDate: dateTime.optional(),
});

/** loans API (v2), schema LoanAccountAction (docs.mambu.com/api/api-v2/loans/schemas/loanaccountaction/). */
export const loanAccountAction = z.strictObject({
  action: z.enum([
    'REQUEST_APPROVAL',
    'SET_INCOMPLETE',
    'APPROVE',
    'UNDO_APPROVE',
    'REJECT',
    'WITHDRAW',
    'CLOSE',
    'UNDO_REJECT',
    'UNDO_WITHDRAW',
    'UNDO_CLOSE',
  ]),
  notes: str.optional(),
});

/**
 * loans_transactions API (v2), schema DisbursementLoanTransactionInput
 * (docs.mambu.com/api/api-v2/loans_transactions/schemas/disbursementloantransactioninput/):
 * bookingDate, valueDate and firstRepaymentDate are `string<date-time>`; externalId "customizable and unique".
 */
export const disbursementInput = z.strictObject({
  amount: z.number().optional(),
  bookingDate: dateTime.optional(),
  valueDate: dateTime.optional(),
  externalId: str.optional(),
  firstRepaymentDate: dateTime.optional(),
  notes: str.optional(),
  originalCurrencyCode: str.optional(),
  shiftAdjustableInterestPeriods: z.boolean().optional(),
  fees: z
    .array(
      z.strictObject({
        amount: z.number().optional(),
        percentage: z.number().optional(),
        predefinedFeeKey: str,
      }),
    )
    .optional(),
  transactionDetails: z
    .strictObject({ transactionChannelId: str.optional(), transactionChannelKey: str.optional() })
    .optional(),
});

/** loans_transactions API (v2), schema LoanTransaction (the answer of a disbursement and of a search). */
export const loanTransaction = z.strictObject({
  encodedKey: str,
  id: str,
  externalId: str.optional(),
  type: z.enum([
    'DISBURSEMENT',
    'DISBURSEMENT_ADJUSTMENT',
    'REPAYMENT',
    'REPAYMENT_ADJUSTMENT',
    'FEE_APPLIED',
  ]),
  amount: z.number(),
  notes: str.optional(),
  parentAccountKey: str,
  parentAccountID: str.optional(),
  userKey: str.optional(),
  valueDate: dateTime,
  bookingDate: dateTime.optional(),
  creationDate: dateTime.optional(),
});

/**
 * The search APIs' criteria (ClientSearchCriteria, GroupSearchCriteria, LoanAccountSearchCriteria,
 * LoanTransactionSearchCriteria): filterCriteria of field, operator, value.
 */
export const searchCriteria = z.strictObject({
  filterCriteria: z.array(
    z.strictObject({
      field: str,
      operator: z.enum([
        'EQUALS',
        'EQUALS_CASE_SENSITIVE',
        'DIFFERENT_THAN',
        'MORE_THAN',
        'LESS_THAN',
        'BETWEEN',
        'ON',
        'AFTER',
        'AFTER_INCLUSIVE',
        'BEFORE',
        'BEFORE_INCLUSIVE',
        'STARTS_WITH',
        'STARTS_WITH_CASE_SENSITIVE',
        'IN',
        'TODAY',
        'THIS_WEEK',
        'THIS_MONTH',
        'THIS_YEAR',
        'LAST_DAYS',
        'EMPTY',
        'NOT_EMPTY',
      ]),
      value: str.optional(),
      secondValue: str.optional(),
      values: z.array(str).optional(),
    }),
  ),
  sortingCriteria: z.strictObject({ field: str, order: z.enum(['ASC', 'DESC']).optional() }).optional(),
});

export const DOCUMENT_OWNER_TYPES = [
  'CLIENT',
  'GROUP',
  'LOAN_PRODUCT',
  'SAVINGS_PRODUCT',
  'CENTRE',
  'BRANCH',
  'USER',
  'LOAN_ACCOUNT',
  'DEPOSIT_ACCOUNT',
  'ID_DOCUMENT',
  'LINE_OF_CREDIT',
  'GL_JOURNAL_ENTRY',
] as const;

/** documents API (v2), POST /documents, multipart/form-data: file, ownerType, id required; name, notes. */
export const documentUpload = z.strictObject({
  ownerType: z.enum(DOCUMENT_OWNER_TYPES),
  id: str,
  name: str.optional(),
  notes: str.optional(),
});

/**
 * documents API (v2), schema Document (docs.mambu.com/api/api-v2/clients/schemas/document/):
 * `id` integer<int64>, `name` and `type` (the file's extension) required.
 */
export const documentResponse = z.strictObject({
  id: int64,
  name: str,
  type: str,
  encodedKey: str.optional(),
  fileName: str.optional(),
  fileSize: int64.optional(),
  location: str.optional(),
  notes: str.optional(),
  ownerKey: str.optional(),
  ownerType: z.enum(DOCUMENT_OWNER_TYPES).optional(),
  creationDate: dateTime.optional(),
  lastModifiedDate: dateTime.optional(),
});

const intConstraint = z.strictObject({
  defaultValue: int32.optional(),
  encodedKey: str.optional(),
  maxValue: int32.optional(),
  minValue: int32.optional(),
});
const amountConstraint = z.strictObject({
  defaultValue: z.number().optional(),
  encodedKey: str.optional(),
  maxValue: z.number().optional(),
  minValue: z.number().optional(),
});

/**
 * loanproducts API (v2), schema LoanProduct: loanAmountSettings.loanAmount, scheduleSettings
 * (numInstallments, repaymentPeriodUnit; docs.mambu.com/api/api-v2/loanproducts/schemas/loanproductschedulesettings/),
 * gracePeriodSettings, newAccountSettings, interestSettings.interestRateSettings.
 */
export const loanProduct = z.strictObject({
  id: str,
  encodedKey: str,
  name: str,
  type: z
    .enum(['FIXED_TERM_LOAN', 'DYNAMIC_TERM_LOAN', 'INTEREST_FREE_LOAN', 'TRANCHED_LOAN', 'REVOLVING_CREDIT'])
    .optional(),
  state: z.enum(['ACTIVE', 'INACTIVE']).optional(),
  loanAmountSettings: z.strictObject({ loanAmount: amountConstraint.optional() }).optional(),
  scheduleSettings: z
    .strictObject({
      numInstallments: intConstraint.optional(),
      repaymentPeriodUnit: z.enum(REPAYMENT_PERIOD_UNITS).optional(),
    })
    .optional(),
  gracePeriodSettings: z
    .strictObject({
      gracePeriod: intConstraint.optional(),
      gracePeriodType: z.enum(GRACE_PERIOD_TYPES).optional(),
    })
    .optional(),
  newAccountSettings: z
    .strictObject({
      accountInitialState: z.enum(['PARTIAL_APPLICATION', 'PENDING_APPROVAL', 'APPROVED']),
      idGeneratorType: z.enum(['INCREMENTAL_NUMBER', 'RANDOM_PATTERN']),
      idPattern: str,
    })
    .optional(),
  interestSettings: z
    .strictObject({
      interestRateSettings: z.array(z.strictObject({ interestRate: amountConstraint })).optional(),
    })
    .optional(),
});

export const CUSTOM_FIELD_ENTITIES = [
  'CLIENT',
  'GROUP',
  'LOAN_ACCOUNT',
  'DEPOSIT_ACCOUNT',
  'BRANCH',
  'CENTRE',
  'USER',
] as const;

/** customfieldsets API (v2), schema CustomFieldSetMeta: GET /customfieldsets?availableFor=… */
export const customFieldSetMeta = z.strictObject({
  id: str,
  name: str,
  encodedKey: str.optional(),
  availableFor: z.enum(CUSTOM_FIELD_ENTITIES),
  type: z.enum(['SINGLE', 'GROUPED']).optional(),
  customFields: z.array(z.strictObject({ id: str, encodedKey: str.optional() })).optional(),
});

/**
 * setup_organization API (v2), schema OrganizationSetup
 * (docs.mambu.com/api/api-v2/setup_organization/schemas/organizationsetup/): GET /setup/organization;
 * institutionName, dateFormat, dateTimeFormat, decimalSeparator required; timeZoneID the tenant's zone.
 */
export const organizationSetup = z.strictObject({
  institutionName: str,
  dateFormat: str,
  dateTimeFormat: str,
  decimalSeparator: z.enum(['COMMA', 'POINT']),
  timeZoneID: str.optional(),
  currency: str.optional(),
  emailAddress: str.optional(),
  phoneNumber: str.optional(),
  creationDate: dateTime.optional(),
  lastModifiedDate: dateTime.optional(),
  address: address.optional(),
});

/** Every API v2 error: schema ErrorResponse / RestError ({ errors: [{ errorCode, errorReason, errorSource }] }). */
export const errorResponse = z.strictObject({
  errors: z.array(z.strictObject({ errorCode: int32, errorReason: str, errorSource: str.optional() })),
});

/** List and read query parameters (offset, limit ≤ 1000, paginationDetails, detailsLevel). */
export const listQuery = z.looseObject({
  offset: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  paginationDetails: z.enum(['ON', 'OFF']).optional(),
  detailsLevel: z.enum(['BASIC', 'FULL']).optional(),
});

export interface MambuOperation {
  method: 'GET' | 'POST';
  /** Express path under /api. */
  path: string;
  /** The published API (the OpenAPI document's name) and its schema of the request and answer. */
  source: string;
  /** A JSON body (multipart bodies are checked field by field: documentUpload). */
  request?: z.ZodType;
  /** The answer of a success: one object, or a list of them. */
  response: z.ZodType;
  list?: boolean;
  /** A write: takes an Idempotency-Key. */
  write?: boolean;
}

/** Every operation the adapter uses, with the published source of its shapes. */
export const MAMBU_OPERATIONS = {
  createClient: {
    method: 'POST',
    path: '/clients',
    write: true,
    request: clientRequest,
    response: clientResponse,
    source: 'clients API v2, POST /clients (createClient), schema Client',
  },
  getClient: {
    method: 'GET',
    path: '/clients/:id',
    response: clientResponse,
    source: 'clients API v2, GET /clients/{clientId} (getById), schema Client',
  },
  searchClients: {
    method: 'POST',
    path: '/clients:search',
    request: searchCriteria,
    response: clientResponse,
    list: true,
    source: 'clients API v2, POST /clients:search, schemas ClientSearchCriteria → Client[]',
  },
  createGroup: {
    method: 'POST',
    path: '/groups',
    write: true,
    request: groupRequest,
    response: groupResponse,
    source: 'groups API v2, POST /groups (create), schema Group',
  },
  getGroup: {
    method: 'GET',
    path: '/groups/:id',
    response: groupResponse,
    source: 'groups API v2, GET /groups/{groupId} (getById), schema Group',
  },
  searchGroups: {
    method: 'POST',
    path: '/groups:search',
    request: searchCriteria,
    response: groupResponse,
    list: true,
    source: 'groups API v2, POST /groups:search, schemas GroupSearchCriteria → Group[]',
  },
  createLoan: {
    method: 'POST',
    path: '/loans',
    write: true,
    request: loanRequest,
    response: loanResponse,
    source: 'loans API v2, POST /loans (create), schema LoanAccount',
  },
  getLoan: {
    method: 'GET',
    path: '/loans/:id',
    response: loanResponse,
    source: 'loans API v2, GET /loans/{loanAccountId} (getById), schema LoanAccount',
  },
  listLoans: {
    method: 'GET',
    path: '/loans',
    response: loanResponse,
    list: true,
    source: 'loans API v2, GET /loans (getAll), schema LoanAccount[]',
  },
  searchLoans: {
    method: 'POST',
    path: '/loans:search',
    request: searchCriteria,
    response: loanResponse,
    list: true,
    source: 'loans API v2, POST /loans:search, schemas LoanAccountSearchCriteria → LoanAccount[]',
  },
  changeLoanState: {
    method: 'POST',
    path: '/loans/:id:changeState',
    write: true,
    request: loanAccountAction,
    response: loanResponse,
    source:
      'loans API v2, POST /loans/{loanAccountId}:changeState (changeState), schemas LoanAccountAction → LoanAccount',
  },
  disburse: {
    method: 'POST',
    path: '/loans/:id/disbursement-transactions',
    write: true,
    request: disbursementInput,
    response: loanTransaction,
    source:
      'loans_transactions API v2, POST /loans/{loanAccountId}/disbursement-transactions, ' +
      'schemas DisbursementLoanTransactionInput → LoanTransaction',
  },
  searchTransactions: {
    method: 'POST',
    path: '/loans/transactions:search',
    request: searchCriteria,
    response: loanTransaction,
    list: true,
    source:
      'loans_transactions API v2, POST /loans/transactions:search, ' +
      'schemas LoanTransactionSearchCriteria → LoanTransaction[]',
  },
  uploadDocument: {
    method: 'POST',
    path: '/documents',
    write: true,
    response: documentResponse,
    source: 'documents API v2, POST /documents (createDocument, multipart/form-data), schema Document',
  },
  listDocuments: {
    method: 'GET',
    path: '/documents/documentsMetadata',
    response: documentResponse,
    list: true,
    source: 'documents API v2, GET /documents/documentsMetadata (entity, ownerKey), schema Document[]',
  },
  listProducts: {
    method: 'GET',
    path: '/loanproducts',
    response: loanProduct,
    list: true,
    source: 'loanproducts API v2, GET /loanproducts (getAll), schema LoanProduct[]',
  },
  getProduct: {
    method: 'GET',
    path: '/loanproducts/:id',
    response: loanProduct,
    source: 'loanproducts API v2, GET /loanproducts/{loanProductId} (getById), schema LoanProduct',
  },
  listCustomFieldSets: {
    method: 'GET',
    path: '/customfieldsets',
    response: customFieldSetMeta,
    list: true,
    source:
      'customfieldsets API v2, GET /customfieldsets (getAll, availableFor), schema CustomFieldSetMeta[]',
  },
  getOrganization: {
    method: 'GET',
    path: '/setup/organization',
    response: organizationSetup,
    source: 'setup_organization API v2, GET /setup/organization, schema OrganizationSetup',
  },
} as const satisfies Record<string, MambuOperation>;

export type MambuOperationName = keyof typeof MAMBU_OPERATIONS;

/** A zod failure as Mambu's errorSource: the property path and what is wrong with it. */
export function contractProblem(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(body)'}: ${i.message}`)
    .join('; ');
}
