import { z } from 'zod';
import { parseFineractDate } from './dates.js';
import type { FieldError } from './errors.js';

/**
 * Apache Fineract's published contract for every operation the Fineract adapter
 * (src/core/fineract/) uses: request and response, field names, types, formats, enums, lengths,
 * required. Written from the facts of Fineract's own OpenAPI source — the springdoc `@Schema`
 * classes in the apache/fineract repository — at release 1.10 (develop 4198b0b, 2024-10-24):
 *
 *   C  fineract-provider/.../portfolio/client/api/ClientsApiResourceSwagger.java
 *   CI fineract-provider/.../portfolio/client/api/ClientIdentifiersApiResourceSwagger.java
 *   L  fineract-provider/.../portfolio/loanaccount/api/LoansApiResourceSwagger.java
 *   LP fineract-loan/.../portfolio/loanproduct/api/LoanProductsApiResourceSwagger.java
 *   O  fineract-provider/.../organisation/office/api/OfficesApiResourceSwagger.java
 *   S  fineract-provider/.../portfolio/search/api/SearchApiResourceSwagger.java
 *   D  fineract-document/.../documentmanagement/api/DocumentManagementApiResourceSwagger.java
 *
 * Where the OpenAPI is silent and the server decides, the rule is the server's, cited by class:
 * lengths and ranges from the validators (ClientDataValidator, LoanApplicationValidator,
 * DocumentCommandValidator, ClientIdentifierCommand), parameters from the supported-parameter
 * lists (ClientApiCollectionConstants, LoanApiConstants, GuarantorJSONinputParams), column widths
 * from the Liquibase changelog. Fineract's `java.time.LocalDate` fields are dates in the request's
 * `dateFormat` + `locale` (JsonParserHelper.extractLocalDateNamed); in answers they are
 * `[yyyy, m, d]` arrays. BigDecimal fields are JSON numbers in the OpenAPI; the server's
 * JsonParserHelper.extractBigDecimalNamed also reads a string with the request's locale.
 *
 * Issue messages are Fineract's code tails (`cannot.be.blank`, `exceeds.max.length`, …):
 * `requestErrors` turns them into the `validation.msg.<resource>.<param>.<code>` errors Fineract
 * answers with.
 */

export const CONTRACT_SOURCE =
  'apache/fineract 1.10 (develop 4198b0b, 2024-10-24), springdoc @Schema classes';

// ---- field types ---------------------------------------------------------------------------

const blankOr = (other: string) => (iss: { input?: unknown }) =>
  iss.input === undefined || iss.input === null || iss.input === '' ? 'cannot.be.blank' : other;

/** A Java Long/Integer id: `integerGreaterThanZero()`. */
const id = () =>
  z
    .number({ error: blankOr('invalid.integer') })
    .int({ error: 'invalid.integer' })
    .positive({ error: 'not.greater.than.zero' });

/** An Integer within an enum's range (`inMinMaxRange`, `isOneOfTheseValues`). */
const intIn = (values: readonly number[]) =>
  z
    .number({ error: blankOr('invalid.integer') })
    .int({ error: 'invalid.integer' })
    .refine((v) => values.includes(v), { error: `is.not.one.of.expected.enumerations:${values.join(', ')}` });

const positiveInt = () =>
  z
    .number({ error: blankOr('invalid.integer') })
    .int({ error: 'invalid.integer' })
    .positive({ error: 'not.greater.than.zero' });

const zeroOrMoreInt = () =>
  z
    .number({ error: blankOr('invalid.integer') })
    .int({ error: 'invalid.integer' })
    .nonnegative({ error: 'not.zero.or.greater' });

/** A String with `notExceedingLengthOf(max)`. */
const text = (max: number) =>
  z.string({ error: blankOr('invalid.type') }).max(max, { error: `exceeds.max.length:${max}` });

const nonBlank = (max: number) => text(max).refine((s) => s.trim() !== '', { error: 'cannot.be.blank' });

/** BigDecimal: a JSON number (OpenAPI), or a decimal string read with the locale (server). */
const decimal = () =>
  z.union([z.number().finite(), z.string().regex(/^-?(\d{1,3}(,\d{3})*|\d+)(\.\d+)?$/)], {
    error: blankOr('invalid.decimal.format'),
  });

/** A date in the request's dateFormat: a String in the OpenAPI; its format is checked with it. */
const requestDate = () => z.string({ error: blankOr('invalid.date.format') });

/** Fineract's `dateFormat` and `locale` (every request with a date needs both). */
const formatFields = {
  dateFormat: z.string().min(1, { error: 'cannot.be.blank' }).optional(),
  locale: z.string().min(1, { error: 'cannot.be.blank' }).optional(),
};

/**
 * Every date parameter present needs `dateFormat` and `locale` and must parse with them
 * (JsonParserHelper: `validation.msg.<param>.invalid.date.format` / `cannot.be.blank`).
 */
function withDates<T extends z.ZodObject>(schema: T, dates: readonly string[]) {
  return schema.superRefine((raw, ctx) => {
    const body = raw as Record<string, unknown>;
    const present = dates.filter((d) => body[d] !== undefined && body[d] !== null);
    if (present.length === 0) return;
    for (const k of ['dateFormat', 'locale'])
      if (typeof body[k] !== 'string' || body[k] === '')
        ctx.addIssue({ code: 'custom', path: [k], message: 'cannot.be.blank' });
    const format = body['dateFormat'];
    if (typeof format !== 'string' || format === '') return;
    for (const d of present)
      if (parseFineractDate(body[d], format) === null)
        ctx.addIssue({ code: 'custom', path: [d], message: 'invalid.date.format', input: body[d] });
  });
}

/** A LocalDate in an answer: `[yyyy, m, d]`. */
const answerDate = () =>
  z.tuple([z.number().int(), z.number().int().min(1).max(12), z.number().int().min(1).max(31)]);

const enumOption = () =>
  z.looseObject({ id: z.number().int(), code: z.string(), value: z.string().optional() });

// ---- requests ------------------------------------------------------------------------------

/**
 * POST /clients — C `PostClientsRequest`; ClientDataValidator.validateForCreate: officeId
 * integerGreaterThanZero, legalFormId inMinMaxRange(1, 2) required, fullname ≤ 160 (entity),
 * firstname/middlename/lastname ≤ 50 (person), externalId ≤ 100, mobileNo ≤ 50, accountNo ≤ 20,
 * active required, activationDate required when active; clientNonPersonDetails
 * (ClientApiCollectionConstants.CLIENT_NON_PERSON_CREATE_REQUEST_DATA_PARAMETERS, remarks ≤ 150,
 * incorpNumber ≤ 50) is accepted though not in the OpenAPI.
 */
/**
 * ClientDataValidator.validateForCreate's rules across fields: a person (legalFormId 1) has
 * firstname + lastname, an entity (2) a fullname, never both; an active client needs its
 * activationDate.
 */
function clientNameAndActivation(
  b: {
    legalFormId: number;
    fullname?: string | undefined;
    firstname?: string | undefined;
    lastname?: string | undefined;
    active: boolean;
    activationDate?: string | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  const blank = (v: string | undefined) => v === undefined || v.trim() === '';
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (b.legalFormId === 2) {
    if (blank(b.fullname)) issue('fullname', 'cannot.be.blank');
    for (const k of ['firstname', 'lastname'] as const)
      if (b[k] !== undefined) issue(k, 'cannot.also.be.provided.when.fullname.is.populated');
  } else {
    if (b.fullname !== undefined) issue('fullname', 'cannot.also.be.provided.when.firstname.is.populated');
    for (const k of ['firstname', 'lastname'] as const) if (blank(b[k])) issue(k, 'cannot.be.blank');
  }
  if (b.active && b.activationDate === undefined) issue('activationDate', 'cannot.be.blank');
}

export const postClientsRequest = withDates(
  z
    .object({
      officeId: id(),
      legalFormId: intIn([1, 2]),
      fullname: text(160).optional(),
      firstname: text(50).optional(),
      middlename: text(50).nullish(),
      lastname: text(50).optional(),
      externalId: text(100).nullish(),
      accountNo: text(20).optional(),
      mobileNo: text(50).nullish(),
      emailAddress: text(100).nullish(),
      groupId: id().optional(),
      staffId: id().nullish(),
      savingsProductId: id().nullish(),
      genderId: id().optional(),
      clientTypeId: id().optional(),
      clientClassificationId: id().optional(),
      isStaff: z.boolean().optional(),
      active: z.boolean({ error: blankOr('must.be.true.or.false') }),
      activationDate: requestDate().optional(),
      submittedOnDate: requestDate().optional(),
      dateOfBirth: requestDate().optional(),
      clientNonPersonDetails: z
        .object({
          constitutionId: id().optional(),
          mainBusinessLineId: id().optional(),
          incorpNumber: text(50).nullish(),
          incorpValidityTillDate: requestDate().optional(),
          remarks: text(150).nullish(),
        })
        .optional(),
      datatables: z.array(z.looseObject({ registeredTableName: z.string() })).optional(),
      address: z.array(z.looseObject({})).optional(),
      ...formatFields,
    })
    .superRefine(clientNameAndActivation),
  ['activationDate', 'submittedOnDate', 'dateOfBirth'],
);

/**
 * POST /clients/{clientId}/identifiers — CI `PostClientsClientIdIdentifiersRequest`;
 * ClientIdentifierCommand.validateForCreate: documentTypeId integerGreaterThanZero, documentKey
 * notBlank; m_client_identifier.document_key VARCHAR(50), description VARCHAR(500).
 */
export const postClientIdentifierRequest = z.object({
  documentTypeId: id(),
  documentKey: nonBlank(50),
  description: text(500).nullish(),
  status: z
    .enum(['active', 'inactive'], { error: 'is.not.one.of.expected.enumerations:active, inactive' })
    .optional(),
});

const frequencyType = () => intIn([0, 1, 2, 3]);

/**
 * POST /loans — L `PostLoansRequest`; LoanApplicationValidator.validateForCreate: the required
 * set (clientId, productId, principal, loanTermFrequency, loanTermFrequencyType, numberOfRepayments,
 * repaymentEvery, repaymentFrequencyType, interestRatePerPeriod, amortizationType, interestType,
 * interestCalculationPeriodType, expectedDisbursementDate, submittedOnDate, loanType,
 * transactionProcessingStrategyCode), loanType an AccountType (individual, group, jlg, glim), PeriodFrequencyType
 * 0–3, AmortizationMethod 0–1, InterestMethod 0–1, InterestCalculationPeriodMethod 0–1,
 * DaysInYearType 1/360/364/365; externalId ≤ 100 (m_loan.external_id), accountNo ≤ 20
 * (m_loan.account_no), submittedOnNote ≤ 500.
 */
export const postLoansRequest = withDates(
  z.object({
    clientId: id(),
    productId: id(),
    principal: decimal(),
    loanTermFrequency: positiveInt(),
    loanTermFrequencyType: frequencyType(),
    numberOfRepayments: positiveInt(),
    repaymentEvery: positiveInt(),
    repaymentFrequencyType: frequencyType(),
    interestRatePerPeriod: decimal(),
    amortizationType: intIn([0, 1]),
    interestType: intIn([0, 1]),
    interestCalculationPeriodType: intIn([0, 1]),
    transactionProcessingStrategyCode: z
      .string({ error: blankOr('invalid.type') })
      .refine((v) => v.trim() !== '', { error: 'cannot.be.blank' }),
    loanType: z.enum(['individual', 'group', 'jlg', 'glim'], {
      error: blankOr('is.not.one.of.expected.enumerations:individual, group, jlg, glim'),
    }),
    expectedDisbursementDate: requestDate(),
    submittedOnDate: requestDate(),
    repaymentsStartingFromDate: requestDate().nullish(),
    interestChargedFromDate: requestDate().nullish(),
    externalId: text(100).nullish(),
    accountNo: text(20).nullish(),
    graceOnPrincipalPayment: zeroOrMoreInt().nullish(),
    graceOnInterestPayment: zeroOrMoreInt().nullish(),
    graceOnInterestCharged: zeroOrMoreInt().nullish(),
    graceOnArrearsAgeing: zeroOrMoreInt().nullish(),
    daysInYearType: intIn([1, 360, 364, 365]).optional(),
    fixedLength: positiveInt().optional(),
    fixedEmiAmount: decimal().optional(),
    maxOutstandingLoanBalance: decimal().optional(),
    inArrearsTolerance: decimal().optional(),
    isFloatingInterestRate: z.boolean().optional(),
    interestRateDifferential: decimal().optional(),
    fundId: id().optional(),
    loanOfficerId: id().optional(),
    loanPurposeId: id().optional(),
    linkAccountId: id().optional(),
    submittedOnNote: text(500).optional(),
    charges: z.array(z.looseObject({ chargeId: id(), amount: decimal().optional() })).optional(),
    ...formatFields,
  }),
  ['expectedDisbursementDate', 'submittedOnDate', 'repaymentsStartingFromDate', 'interestChargedFromDate'],
);

/**
 * POST /loans/{loanId}?command=approve — L `PostLoansLoanIdRequest` (approvedOnDate,
 * approvedLoanAmount, expectedDisbursementDate, note, dateFormat, locale);
 * LoanApplicationTransitionValidator.validateApproval (fineract-loan): approvedOnDate required.
 */
export const approveLoanRequest = withDates(
  z.object({
    approvedOnDate: requestDate(),
    approvedLoanAmount: decimal().optional(),
    expectedDisbursementDate: requestDate().optional(),
    note: z.string().optional(),
    ...formatFields,
  }),
  ['approvedOnDate', 'expectedDisbursementDate'],
);

/**
 * POST /loans/{loanId}?command=disburse — L `PostLoansLoanIdRequest` (actualDisbursementDate,
 * transactionAmount, externalId, paymentTypeId, note, fixedEmiAmount, adjustRepaymentDate);
 * LoanTransactionValidator.validateDisbursement: actualDisbursementDate required, note ≤ 1000;
 * externalId ≤ 100 (m_loan_transaction.external_id).
 */
export const disburseLoanRequest = withDates(
  z.object({
    actualDisbursementDate: requestDate(),
    transactionAmount: decimal().optional(),
    fixedEmiAmount: decimal().optional(),
    externalId: text(100).optional(),
    paymentTypeId: id().optional(),
    note: text(1000).optional(),
    adjustRepaymentDate: requestDate().optional(),
    ...formatFields,
  }),
  ['actualDisbursementDate', 'adjustRepaymentDate'],
);

/**
 * POST /loans/{loanId}/guarantors — GuarantorsApiResource.createGuarantor (no @Schema class: its
 * parameters are GuarantorJSONinputParams, read by GuarantorCommandFromApiJsonDeserializer;
 * GuarantorCommand.validateForCreate: guarantorTypeId one of 1 customer, 2 staff, 3 external;
 * entityId required for 1 and 2; firstname and lastname notBlank ≤ 50 for 3).
 */
export const postGuarantorRequest = withDates(
  z
    .object({
      guarantorTypeId: intIn([1, 2, 3]),
      entityId: id().optional(),
      clientRelationshipTypeId: id().optional(),
      firstname: text(50).optional(),
      lastname: text(50).optional(),
      addressLine1: z.string().optional(),
      addressLine2: z.string().optional(),
      city: z.string().optional(),
      state: z.string().optional(),
      country: z.string().optional(),
      zip: z.string().optional(),
      housePhoneNumber: z.string().optional(),
      mobileNumber: z.string().optional(),
      comment: z.string().optional(),
      dob: requestDate().optional(),
      savingsId: id().optional(),
      amount: decimal().optional(),
      ...formatFields,
    })
    .superRefine((g, ctx) => {
      if ((g.guarantorTypeId === 1 || g.guarantorTypeId === 2) && g.entityId === undefined)
        ctx.addIssue({ code: 'custom', path: ['entityId'], message: 'cannot.be.blank' });
      if (g.guarantorTypeId === 3)
        for (const k of ['firstname', 'lastname'] as const)
          if (g[k] === undefined || g[k].trim() === '')
            ctx.addIssue({ code: 'custom', path: [k], message: 'cannot.be.blank' });
    }),
  ['dob'],
);

/**
 * POST /loans/{loanId}/documents, multipart — D `DocumentUploadRequest` (name, description, file)
 * and DocumentManagementApiResource.createDocument's @FormDataParam; DocumentCommandValidator
 * .validateForCreate: name notBlank ≤ 250, fileName notBlank ≤ 250, size integerGreaterThanZero;
 * m_document.description VARCHAR(1000).
 */
export const postDocumentRequest = z.object({
  name: nonBlank(250),
  description: text(1000).nullish(),
  fileName: nonBlank(250),
  size: z.number().int().positive({ error: 'not.greater.than.zero' }),
});

// ---- responses -----------------------------------------------------------------------------

/** The CommandProcessingResult of a write (C PostClientsResponse, L PostLoansResponse, …). */
const commandResult = (required: Record<string, z.ZodType>) =>
  z.looseObject({
    resourceId: z.number().int(),
    officeId: z.number().int().optional(),
    clientId: z.number().int().optional(),
    loanId: z.number().int().optional(),
    resourceExternalId: z.string().nullish(),
    ...required,
  });

/** O `GetOfficesResponse`. */
export const getOfficeResponse = z.looseObject({
  id: z.number().int(),
  name: z.string(),
  nameDecorated: z.string().optional(),
  externalId: z.string().nullish(),
  openingDate: answerDate(),
  hierarchy: z.string(),
});

/** C `GetClientsClientIdResponse` (status is an EnumOptionData: id, code, value). */
export const getClientResponse = z.looseObject({
  id: z.number().int(),
  accountNo: z.string(),
  externalId: z.string().nullish(),
  status: enumOption(),
  active: z.boolean(),
  activationDate: answerDate().optional(),
  firstname: z.string().optional(),
  lastname: z.string().optional(),
  fullname: z.string().optional(),
  displayName: z.string(),
  officeId: z.number().int(),
  officeName: z.string().optional(),
  legalForm: enumOption().optional(),
});

/** C `GetClientsResponse`: totalFilteredRecords + pageItems. */
export const getClientsResponse = z.looseObject({
  totalFilteredRecords: z.number().int(),
  pageItems: z.array(getClientResponse),
});

/** CI `GetClientsClientIdIdentifiersResponse`, a list. */
export const getClientIdentifiersResponse = z.array(
  z.looseObject({
    id: z.number().int(),
    clientId: z.number().int(),
    documentType: z.looseObject({ id: z.number().int(), name: z.string() }),
    documentKey: z.string(),
    description: z.string().nullish(),
  }),
);

/**
 * S `GetSearchResponse`, a list. The OpenAPI types entityAccountNo as Long; SearchData holds it as a
 * String (accountNo is text): both are accepted.
 */
export const getSearchResponse = z.array(
  z.looseObject({
    entityId: z.number().int(),
    entityAccountNo: z.union([z.string(), z.number()]).nullish(),
    entityExternalId: z.string().nullish(),
    entityName: z.string(),
    entityType: z.string(),
    parentId: z.number().int().nullish(),
    parentName: z.string().nullish(),
    entityStatus: enumOption().nullish(),
  }),
);

/** LP `GetLoanProductsProductIdResponse` (holdGuaranteeFunds: LoanProductData). */
export const getLoanProductResponse = z.looseObject({
  id: z.number().int(),
  name: z.string(),
  minPrincipal: z.number().nullish(),
  maxPrincipal: z.number().nullish(),
  isLinkedToFloatingInterestRates: z.boolean(),
  holdGuaranteeFunds: z.boolean().optional(),
});

/**
 * L `GetLoansLoanIdResponse`: the fields the adapter reads (id, accountNo, externalId, status.id,
 * principal, annualInterestRate, repayment schedule terms, timeline dates) with their published
 * types; `expectedFirstRepaymentOnDate` is LoanAccountData's (not in the OpenAPI).
 */
export const getLoanResponse = z.looseObject({
  id: z.number().int(),
  accountNo: z.string(),
  externalId: z.string().nullish(),
  clientId: z.number().int(),
  loanProductId: z.number().int(),
  status: z.looseObject({
    id: z.number().int(),
    code: z.string(),
    value: z.string().optional(),
    pendingApproval: z.boolean(),
    waitingForDisbursal: z.boolean(),
    active: z.boolean(),
  }),
  principal: z.number(),
  approvedPrincipal: z.number().optional(),
  proposedPrincipal: z.number().optional(),
  termFrequency: z.number().int(),
  termPeriodFrequencyType: enumOption(),
  numberOfRepayments: z.number().int(),
  repaymentEvery: z.number().int(),
  repaymentFrequencyType: enumOption(),
  interestRatePerPeriod: z.number(),
  annualInterestRate: z.number(),
  expectedFirstRepaymentOnDate: answerDate().optional(),
  timeline: z.looseObject({
    submittedOnDate: answerDate(),
    expectedDisbursementDate: answerDate(),
    expectedMaturityDate: answerDate(),
    approvedOnDate: answerDate().optional(),
    actualDisbursementDate: answerDate().optional(),
  }),
});

/** L `GetLoansResponse`. */
export const getLoansResponse = z.looseObject({
  totalFilteredRecords: z.number().int(),
  pageItems: z.array(getLoanResponse),
});

/** GET /loans/{loanId}/guarantors: a list of GuarantorData (no @Schema class). */
export const getGuarantorsResponse = z.array(
  z.looseObject({
    id: z.number().int(),
    loanId: z.number().int(),
    guarantorType: enumOption(),
    entityId: z.number().int().nullish(),
    firstname: z.string().nullish(),
    lastname: z.string().nullish(),
    status: z.boolean(),
  }),
);

/** D `GetEntityTypeEntityIdDocumentsResponse`, a list. */
export const getDocumentsResponse = z.array(
  z.looseObject({
    id: z.number().int(),
    parentEntityType: z.string(),
    parentEntityId: z.number().int(),
    name: z.string(),
    fileName: z.string(),
    size: z.number().int(),
    type: z.string(),
    description: z.string().nullish(),
  }),
);

// ---- the operations ------------------------------------------------------------------------

export interface FineractOperation {
  method: 'GET' | 'POST';
  /** Express-style path below /fineract-provider/api/v1. */
  path: string;
  /** Fineract's resource name in validation codes (`validation.msg.<resource>.…`). */
  resource: string;
  /** File and class of the published schema this operation is written from. */
  source: string;
  request?: z.ZodType;
  response: z.ZodType;
}

export const FINERACT_OPERATIONS = {
  getOffice: {
    method: 'GET',
    path: '/offices/:officeId',
    resource: 'office',
    source: 'O GetOfficesResponse',
    response: getOfficeResponse,
  },
  getClient: {
    method: 'GET',
    path: '/clients/:clientId',
    resource: 'client',
    source: 'C GetClientsClientIdResponse',
    response: getClientResponse,
  },
  getClientByExternalId: {
    method: 'GET',
    path: '/clients/external-id/:externalId',
    resource: 'client',
    source: 'C GetClientsClientIdResponse (ClientsApiResource.retrieveOne by external id)',
    response: getClientResponse,
  },
  listClients: {
    method: 'GET',
    path: '/clients',
    resource: 'client',
    source: 'C GetClientsResponse',
    response: getClientsResponse,
  },
  createClient: {
    method: 'POST',
    path: '/clients',
    resource: 'client',
    source: 'C PostClientsRequest / PostClientsResponse; ClientDataValidator.validateForCreate',
    request: postClientsRequest,
    response: commandResult({ clientId: z.number().int() }),
  },
  listClientIdentifiers: {
    method: 'GET',
    path: '/clients/:clientId/identifiers',
    resource: 'clientIdentifier',
    source: 'CI GetClientsClientIdIdentifiersResponse',
    response: getClientIdentifiersResponse,
  },
  createClientIdentifier: {
    method: 'POST',
    path: '/clients/:clientId/identifiers',
    resource: 'clientIdentifier',
    source: 'CI PostClientsClientIdIdentifiersRequest / PostClientsClientIdIdentifiersResponse',
    request: postClientIdentifierRequest,
    response: commandResult({ clientId: z.number().int() }),
  },
  search: {
    method: 'GET',
    path: '/search',
    resource: 'search',
    source: 'S GetSearchResponse',
    response: getSearchResponse,
  },
  getLoanProduct: {
    method: 'GET',
    path: '/loanproducts/:productId',
    resource: 'loanproduct',
    source: 'LP GetLoanProductsProductIdResponse',
    response: getLoanProductResponse,
  },
  getLoan: {
    method: 'GET',
    path: '/loans/:loanId',
    resource: 'loan',
    source: 'L GetLoansLoanIdResponse',
    response: getLoanResponse,
  },
  getLoanByExternalId: {
    method: 'GET',
    path: '/loans/external-id/:externalId',
    resource: 'loan',
    source: 'L GetLoansLoanIdResponse (LoansApiResource.retrieveLoan by external id)',
    response: getLoanResponse,
  },
  listLoans: {
    method: 'GET',
    path: '/loans',
    resource: 'loan',
    source: 'L GetLoansResponse',
    response: getLoansResponse,
  },
  createLoan: {
    method: 'POST',
    path: '/loans',
    resource: 'loan',
    source: 'L PostLoansRequest / PostLoansResponse; LoanApplicationValidator.validateForCreate',
    request: postLoansRequest,
    response: commandResult({ loanId: z.number().int(), clientId: z.number().int() }),
  },
  approveLoan: {
    method: 'POST',
    path: '/loans/:loanId?command=approve',
    resource: 'loanapplication',
    source:
      'L PostLoansLoanIdRequest / PostLoansLoanIdResponse; LoanApplicationTransitionValidator.validateApproval',
    request: approveLoanRequest,
    response: commandResult({ loanId: z.number().int() }),
  },
  disburseLoan: {
    method: 'POST',
    path: '/loans/:loanId?command=disburse',
    resource: 'loan.disbursement',
    source:
      'L PostLoansLoanIdRequest / PostLoansLoanIdResponse; LoanTransactionValidator.validateDisbursement',
    request: disburseLoanRequest,
    response: commandResult({ loanId: z.number().int() }),
  },
  listGuarantors: {
    method: 'GET',
    path: '/loans/:loanId/guarantors',
    resource: 'guarantor',
    source: 'GuarantorsApiResource.retrieveGuarantorDetails (GuarantorData)',
    response: getGuarantorsResponse,
  },
  createGuarantor: {
    method: 'POST',
    path: '/loans/:loanId/guarantors',
    resource: 'guarantor',
    source: 'GuarantorsApiResource.createGuarantor (GuarantorJSONinputParams, GuarantorCommand)',
    request: postGuarantorRequest,
    response: commandResult({ loanId: z.number().int() }),
  },
  listDocuments: {
    method: 'GET',
    path: '/loans/:loanId/documents',
    resource: 'document',
    source: 'D GetEntityTypeEntityIdDocumentsResponse',
    response: getDocumentsResponse,
  },
  createDocument: {
    method: 'POST',
    path: '/loans/:loanId/documents',
    resource: 'document',
    source: 'D DocumentUploadRequest / PostEntityTypeEntityIdDocumentsResponse; DocumentCommandValidator',
    request: postDocumentRequest,
    response: z.looseObject({ resourceId: z.number().int(), resourceIdentifier: z.string().optional() }),
  },
} as const satisfies Record<string, FineractOperation>;

export type FineractOperationName = keyof typeof FINERACT_OPERATIONS;

const MESSAGES: Record<string, (p: string, arg: string | undefined) => string> = {
  'cannot.be.blank': (p) => `The parameter \`${p}\` is mandatory.`,
  'exceeds.max.length': (p, a) => `The parameter \`${p}\` exceeds max length of ${a ?? '?'}.`,
  'not.greater.than.zero': (p) => `The parameter \`${p}\` must be greater than 0.`,
  'not.zero.or.greater': (p) => `The parameter \`${p}\` must be zero or greater.`,
  'invalid.integer': (p) => `The parameter \`${p}\` must be a whole number.`,
  'invalid.decimal.format': (p) => `The parameter \`${p}\` is not a valid decimal value.`,
  'invalid.date.format': (p) =>
    `The parameter \`${p}\` is invalid based on the dateFormat and locale provided.`,
  'must.be.true.or.false': (p) => `The parameter \`${p}\` must be set as true or false.`,
  'is.not.one.of.expected.enumerations': (p, a) => `The parameter \`${p}\` must be one of [ ${a ?? ''} ] .`,
  'invalid.type': (p) => `The parameter \`${p}\` has the wrong type.`,
  'cannot.also.be.provided.when.fullname.is.populated': (p) =>
    `The parameter \`${p}\` cannot also be provided when fullname is populated.`,
  'cannot.also.be.provided.when.firstname.is.populated': (p) =>
    `The parameter \`${p}\` cannot also be provided when firstname is populated.`,
};

/**
 * The request's violations of an operation's published contract, as Fineract's field errors
 * (empty when it conforms). An issue without a Fineract code tail is `invalid.type`.
 */
export function requestErrors(op: FineractOperationName, body: unknown): FieldError[] {
  const schema = (FINERACT_OPERATIONS[op] as FineractOperation).request;
  if (schema === undefined) return [];
  const r = schema.safeParse(body);
  if (r.success) return [];
  const seen = new Set<string>();
  const out: FieldError[] = [];
  for (const issue of r.error.issues) {
    const parameterName = issue.path.map(String).join('.') || 'body';
    const [tail, arg] = issue.message.split(':') as [string, string | undefined];
    const code = tail in MESSAGES ? tail : 'invalid.type';
    const key = `${parameterName} ${code}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const value = pathValue(body, issue.path);
    out.push({
      parameterName,
      code,
      message: (MESSAGES[code] ?? MESSAGES['invalid.type']!)(parameterName, code === tail ? arg : undefined),
      ...(value !== undefined ? { value } : {}),
    });
  }
  return out;
}

/** Where an answer departs from the operation's published response schema (empty when it fits). */
export function responseProblems(op: FineractOperationName, body: unknown): string[] {
  const r = (FINERACT_OPERATIONS[op] as FineractOperation).response.safeParse(body);
  if (r.success) return [];
  return r.error.issues.map((i) => `${i.path.map(String).join('.') || '(answer)'}: ${i.message}`);
}

function pathValue(body: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = body;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}
