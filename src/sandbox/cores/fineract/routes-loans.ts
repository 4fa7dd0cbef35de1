import type { Request, Router } from 'express';
import { checkContract, route } from './pipeline.js';
import { addPeriod, dateArray, num, parseFineractDate } from './dates.js';
import { domainFail, integrityFail, validationFail } from './errors.js';
import { checkUnsupported, listing } from './routes-clients.js';
import type { SimLoan, SimState } from './model.js';

/** LoanApiConstants / LoanApplicationValidator's supported parameters of a loan application. */
const LOAN_PARAMS = new Set([
  'clientId',
  'productId',
  'principal',
  'loanTermFrequency',
  'loanTermFrequencyType',
  'loanType',
  'numberOfRepayments',
  'repaymentEvery',
  'repaymentFrequencyType',
  'interestRatePerPeriod',
  'amortizationType',
  'interestType',
  'interestCalculationPeriodType',
  'transactionProcessingStrategyCode',
  'expectedDisbursementDate',
  'submittedOnDate',
  'externalId',
  'dateFormat',
  'locale',
  'repaymentsStartingFromDate',
  'interestChargedFromDate',
  'graceOnPrincipalPayment',
  'graceOnInterestPayment',
  'graceOnInterestCharged',
  'graceOnArrearsAgeing',
  'daysInYearType',
  'allowPartialPeriodInterestCalcualtion',
  'isEqualAmortization',
  'fundId',
  'loanOfficerId',
  'loanPurposeId',
  'charges',
  'collateral',
  'disbursementData',
  'linkAccountId',
  'maxOutstandingLoanBalance',
  'inArrearsTolerance',
  'fixedEmiAmount',
  'isTopup',
  'datatables',
  'submittedOnNote',
  'createStandingInstructionAtDisbursement',
  'repaymentFrequencyNthDayType',
  'repaymentFrequencyDayOfWeekType',
  'isFloatingInterestRate',
  'interestRateDifferential',
  'accountNo',
  'enableInstallmentLevelDelinquency',
  'fixedLength',
]);
const APPROVE_PARAMS = new Set([
  'approvedOnDate',
  'approvedLoanAmount',
  'expectedDisbursementDate',
  'note',
  'dateFormat',
  'locale',
  'disbursementData',
]);
const DISBURSE_PARAMS = new Set([
  'actualDisbursementDate',
  'transactionAmount',
  'fixedEmiAmount',
  'note',
  'dateFormat',
  'locale',
  'paymentTypeId',
  'accountNumber',
  'checkNumber',
  'routingCode',
  'receiptNumber',
  'bankNumber',
  'externalId',
  'adjustRepaymentDate',
]);
/** m_loan.principal_amount DECIMAL(19,6): 13 digits before the point. */
const MAX_PRINCIPAL_EXCLUSIVE = 1e13;
const FREQ = ['days', 'weeks', 'months', 'years'];
const STATUSES: Record<number, [string, string]> = {
  100: ['loanStatusType.submitted.and.pending.approval', 'Submitted and pending approval'],
  200: ['loanStatusType.approved', 'Approved'],
  300: ['loanStatusType.active', 'Active'],
};

const frequency = (prefix: string, id: number) => ({
  id,
  code: `${prefix}.periodFrequencyType.${FREQ[id] ?? ''}`,
  value: FREQ[id] ?? '',
});

export function loanJson(l: SimLoan): Record<string, unknown> {
  const b = l.body;
  const iso = (k: string): string | undefined =>
    parseFineractDate(b[k], String(b['dateFormat'])) ?? undefined;
  const disb = iso('expectedDisbursementDate') ?? '2000-01-01';
  const [code, value] = STATUSES[l.statusId] ?? ['loanStatusType.invalid', 'Invalid'];
  const principal = num(b['principal'], b['locale']) ?? 0;
  const rate = num(b['interestRatePerPeriod'], b['locale']) ?? 0;
  const first = iso('repaymentsStartingFromDate');
  return {
    id: l.id,
    accountNo: l.accountNo,
    externalId: l.externalId,
    clientId: l.clientId,
    loanProductId: b['productId'],
    status: {
      id: l.statusId,
      code,
      value,
      pendingApproval: l.statusId === 100,
      waitingForDisbursal: l.statusId === 200,
      active: l.statusId === 300,
    },
    principal,
    approvedPrincipal: principal,
    proposedPrincipal: principal,
    termFrequency: b['loanTermFrequency'],
    termPeriodFrequencyType: frequency('termFrequency', Number(b['loanTermFrequencyType'])),
    numberOfRepayments: b['numberOfRepayments'],
    repaymentEvery: b['repaymentEvery'],
    repaymentFrequencyType: frequency('repaymentFrequency', Number(b['repaymentFrequencyType'])),
    interestRatePerPeriod: rate,
    annualInterestRate: rate,
    ...(first !== undefined ? { expectedFirstRepaymentOnDate: dateArray(first) } : {}),
    timeline: {
      submittedOnDate: dateArray(iso('submittedOnDate')),
      expectedDisbursementDate: dateArray(disb),
      expectedMaturityDate: dateArray(
        addPeriod(disb, Number(b['loanTermFrequency']), Number(b['loanTermFrequencyType'])),
      ),
      ...(l.approvedOnDate ? { approvedOnDate: dateArray(l.approvedOnDate) } : {}),
      ...(l.actualDisbursementDate ? { actualDisbursementDate: dateArray(l.actualDisbursementDate) } : {}),
    },
  };
}

export function loanById(s: SimState, id: unknown): SimLoan {
  const l = s.loans.find((x) => String(x.id) === String(id));
  if (!l)
    throw domainFail(404, 'error.msg.loan.id.invalid', `Loan with identifier ${String(id)} does not exist`);
  return l;
}

/** LoanApplicationValidator / LoanScheduleValidator's rules across fields (400). */
function scheduleRules(b: Record<string, unknown>): void {
  const fail = (parameterName: string, code: string, message: string) => {
    throw validationFail('loan', [{ parameterName, code, message }]);
  };
  const repayments = b['numberOfRepayments'] as number;
  const grace = b['graceOnPrincipalPayment'];
  if (typeof grace === 'number' && grace >= repayments)
    fail(
      'graceOnPrincipalPayment',
      'must.be.less.than.number.of.repayments',
      `The parameter \`graceOnPrincipalPayment\` (${grace}) must be less than numberOfRepayments (${repayments}).`,
    );
  if (num(b['principal'], b['locale'])! <= 0)
    fail('principal', 'not.greater.than.zero', 'The parameter `principal` must be greater than 0.');
  if (b['loanTermFrequencyType'] !== b['repaymentFrequencyType'])
    fail(
      'loanTermFrequencyType',
      'not.equal.to.repayment.frequency.type',
      'Loan term frequency type must be the same as the repayment frequency type.',
    );
  const expectedTerm = (b['repaymentEvery'] as number) * repayments;
  if (b['loanTermFrequency'] !== expectedTerm)
    fail(
      'loanTermFrequency',
      'must.equal.repaymentEvery.times.numberOfRepayments',
      `Loan term frequency (${String(b['loanTermFrequency'])}) must be equal to repaymentEvery × ` +
        `numberOfRepayments (${expectedTerm}).`,
    );
  const submitted = parseFineractDate(b['submittedOnDate'], String(b['dateFormat']));
  const disbursed = parseFineractDate(b['expectedDisbursementDate'], String(b['dateFormat']));
  if (submitted !== null && disbursed !== null && submitted > disbursed)
    fail(
      'expectedDisbursementDate',
      'cannot.be.before.submittal.date',
      'The date on which a loan is disbursed cannot be before its submittal date.',
    );
}

/** The loan's product must exist and agree (floating rate, principal range). */
function productRules(s: SimState, b: Record<string, unknown>, principal: number): void {
  const product = s.product(b['productId'] as number);
  if (product === null)
    throw domainFail(
      404,
      'error.msg.loanproduct.id.invalid',
      `Loan product with identifier ${String(b['productId'])} does not exist`,
    );
  if (product.isFloatingInterestRate === true && b['interestRatePerPeriod'] !== undefined)
    throw validationFail('loan', [
      {
        parameterName: 'interestRatePerPeriod',
        code: 'not.supported.for.selected.interest.rate.type',
        message:
          'The parameter `interestRatePerPeriod` is not supported for a product linked to floating interest rates.',
      },
    ]);
  if (
    (product.minPrincipal !== undefined && principal < product.minPrincipal) ||
    (product.maxPrincipal !== undefined && principal > product.maxPrincipal)
  )
    throw validationFail('loan', [
      {
        parameterName: 'principal',
        code: 'is.not.within.expected.range',
        message:
          `The parameter \`principal\` must be between ${product.minPrincipal ?? 0} and ` +
          `${product.maxPrincipal ?? 'unbounded'}.`,
      },
    ]);
}

function createLoan(s: SimState) {
  return (req: Request) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    checkUnsupported(b, LOAN_PARAMS);
    checkContract(s, 'createLoan', b);
    scheduleRules(b);
    const principal = num(b['principal'], b['locale']) as number;
    // m_loan.principal_amount is DECIMAL(19,6): the insert fails (data integrity, 403).
    if (principal >= MAX_PRINCIPAL_EXCLUSIVE)
      throw integrityFail("Out of range value for column 'principal_amount'");
    const client = s.clients.find((c) => c.id === b['clientId']);
    if (!client)
      throw domainFail(
        404,
        'error.msg.client.id.invalid',
        `Client with identifier ${String(b['clientId'])} does not exist`,
      );
    if (!client.active) throw domainFail(403, 'error.msg.loan.client.not.active', 'Client is not active.');
    productRules(s, b, principal);
    const externalId = typeof b['externalId'] === 'string' ? b['externalId'] : null;
    if (externalId !== null && s.loans.some((l) => l.externalId === externalId))
      throw domainFail(
        403,
        'error.msg.loan.with.externalId.already.used',
        'Loan with externalId is already registered.',
      );
    const sentAccountNo = typeof b['accountNo'] === 'string' && b['accountNo'] !== '' ? b['accountNo'] : null;
    if (sentAccountNo !== null && s.loans.some((l) => l.accountNo === sentAccountNo))
      throw domainFail(
        403,
        'error.msg.loan.duplicate.accountNo',
        `Loan with accountNo \`${sentAccountNo}\` already exists`,
      );
    const id = s.newId();
    const l: SimLoan = {
      id,
      externalId,
      accountNo: sentAccountNo ?? String(id).padStart(9, '0'),
      clientId: client.id,
      statusId: 100,
      body: b,
    };
    s.loans.push(l);
    return { body: { officeId: client.officeId, clientId: client.id, loanId: l.id, resourceId: l.id } };
  };
}

function afterBusinessDate(s: SimState, resource: string, param: string, iso: string | null): void {
  const business = s.businessDate();
  if (business !== null && iso !== null && iso > business)
    throw validationFail(resource, [
      {
        parameterName: param,
        code: 'cannot.be.a.future.date',
        message: `The parameter \`${param}\` (${iso}) cannot be after the business date ${business}.`,
      },
    ]);
}

/** POST /loans/{id}?command=approve|disburse: the loan state machine 100 → 200 → 300. */
/**
 * The loan state transitions the adapter uses (POST /loans/{id}?command=…): the parameters each
 * takes, its contract operation, its date, the status it needs and the one it leaves, and
 * Fineract's refusal when the loan is in another status.
 */
const LOAN_COMMANDS = {
  approve: {
    params: APPROVE_PARAMS,
    operation: 'approveLoan',
    resource: 'loanapplication',
    dateParam: 'approvedOnDate',
    from: 100,
    to: 200,
    refusal: [
      'error.msg.loan.approve.account.is.not.submitted.and.pending.state',
      'Loan Account Approval is not allowed. Loan Account is not in submitted and pending approval state.',
    ],
  },
  disburse: {
    params: DISBURSE_PARAMS,
    operation: 'disburseLoan',
    resource: 'loan.disbursement',
    dateParam: 'actualDisbursementDate',
    from: 200,
    to: 300,
    refusal: [
      'error.msg.loan.disbursal.account.is.not.approve.not.disbursed.state',
      'Loan Disbursal is not allowed. Loan Account is not in approved and not disbursed state.',
    ],
  },
} as const;

function loanCommand(s: SimState) {
  return (req: Request) => {
    const l = loanById(s, req.params['id']);
    const b = (req.body ?? {}) as Record<string, unknown>;
    const command = req.query['command'];
    const c = command === 'approve' || command === 'disburse' ? LOAN_COMMANDS[command] : null;
    if (c === null)
      throw domainFail(
        400,
        'error.msg.command.unsupported',
        `Unrecognized command ${JSON.stringify(command)}`,
      );
    checkUnsupported(b, c.params);
    checkContract(s, c.operation, b);
    const d = parseFineractDate(b[c.dateParam], String(b['dateFormat']));
    afterBusinessDate(s, c.resource, c.dateParam, d);
    if (l.statusId !== c.from) throw domainFail(400, c.refusal[0], c.refusal[1]);
    l.statusId = c.to;
    if (d !== null) l[c.dateParam] = d;
    return {
      body: {
        officeId: 1,
        clientId: l.clientId,
        loanId: l.id,
        resourceId: l.id,
        changes: { status: { id: c.to } },
      },
    };
  };
}

export function loanRoutes(s: SimState, r: Router): void {
  r.get(
    '/loanproducts/:id',
    route(s, 'getLoanProduct', (req) => {
      const id = Number(req.params['id']);
      const p = Number.isInteger(id) ? s.product(id) : null;
      if (p === null)
        throw domainFail(
          404,
          'error.msg.loanproduct.id.invalid',
          `Loan product with identifier ${String(req.params['id'])} does not exist`,
        );
      return {
        body: {
          id,
          name: p.name ?? `Product ${id}`,
          isLinkedToFloatingInterestRates: p.isFloatingInterestRate === true,
          holdGuaranteeFunds: p.holdGuaranteeFunds === true,
          ...(p.minPrincipal !== undefined ? { minPrincipal: p.minPrincipal } : {}),
          ...(p.maxPrincipal !== undefined ? { maxPrincipal: p.maxPrincipal } : {}),
        },
      };
    }),
  );
  r.get('/loans', route(s, 'listLoans', listing(s.loans, loanJson)));
  r.get(
    '/loans/external-id/:eid',
    route(s, 'getLoanByExternalId', (req) => {
      const l = s.loans.find((x) => x.externalId === req.params['eid']);
      if (!l)
        throw domainFail(
          404,
          'error.msg.loan.external.id.invalid',
          `Loan with external identifier ${String(req.params['eid'])} does not exist`,
        );
      return { body: loanJson(l) };
    }),
  );
  r.get(
    '/loans/:id',
    route(s, 'getLoan', (req) => ({ body: loanJson(loanById(s, req.params['id'])) })),
  );
  r.post('/loans', route(s, 'createLoan', createLoan(s), 'CREATE_LOAN'));
  r.post(
    '/loans/:id',
    route(
      s,
      (req) =>
        req.query['command'] === 'approve'
          ? 'approveLoan'
          : req.query['command'] === 'disburse'
            ? 'disburseLoan'
            : null,
      loanCommand(s),
      (req) =>
        req.query['command'] === 'approve'
          ? 'APPROVE_LOAN'
          : req.query['command'] === 'disburse'
            ? 'DISBURSE_LOAN'
            : 'UNKNOWN_LOAN',
    ),
  );
}
