/**
 * The simulated Mambu tenant's setup: users, loan products and their ranges, custom field sets, the
 * organization's time zone. DEFAULT_MAMBU_TENANT fits `mappings/mambu` (its products and custom
 * field sets) so the sandbox's loans board as they come; tests and `sandbox --core mambu` use it.
 */

export interface MambuUser {
  username: string;
  password: string;
}

export interface MambuProductSetup {
  id: string;
  name?: string;
  encodedKey?: string;
  accountInitialState?: 'PARTIAL_APPLICATION' | 'PENDING_APPROVAL';
  loanAmount?: { min?: number; max?: number };
  installments?: { min?: number; max?: number };
  repaymentPeriodUnits?: string[];
  /** The grace type a loan of this product may have (a loan without grace sends NONE / 0). */
  gracePeriodType?: 'NONE' | 'PAY_INTEREST_ONLY' | 'INTEREST_FORGIVENESS';
  interestRate?: { min?: number; max?: number };
}

export interface MambuTenantSetup {
  users: MambuUser[];
  apiKeys: string[];
  products: MambuProductSetup[];
  /** Custom field sets by entity (CLIENT, GROUP, LOAN_ACCOUNT): set id → field ids. */
  customFieldSets: Record<string, Record<string, string[]>>;
  /** Whether the approver may also disburse (Mambu's "loan disbursals need another user"); default false. */
  approverMayDisburse: boolean;
  /** The organization's time zone (GET /setup/organization timeZoneID). */
  timeZone: string;
  institutionName: string;
}

export const DEFAULT_MAMBU_TENANT: MambuTenantSetup = {
  // An approver and a separate disburser: Mambu may forbid the approver to disburse.
  users: [
    { username: 'approver', password: 'approver-pass' },
    { username: 'disburser', password: 'disburser-pass' },
  ],
  apiKeys: [],
  // The mambu mapping set's products (its productTypeKey lookup and defaults).
  products: [
    { id: 'term-loan', name: 'Term loan', gracePeriodType: 'PAY_INTEREST_ONLY' },
    { id: 'variable-term-loan', name: 'Variable-rate term loan', gracePeriodType: 'PAY_INTEREST_ONLY' },
    {
      id: 'personal-loan',
      name: 'Personal loan',
      gracePeriodType: 'PAY_INTEREST_ONLY',
      accountInitialState: 'PARTIAL_APPLICATION',
    },
  ],
  // core.mambu.taxIdField and loanRefField defaults.
  customFieldSets: {
    CLIENT: { _taxInformation_Clients: ['taxId'] },
    GROUP: { _taxInformation_Groups: ['taxId'] },
    LOAN_ACCOUNT: { _boarding_Loans: ['platformLoanId'] },
  },
  approverMayDisburse: false,
  timeZone: 'America/Chicago',
  institutionName: 'Simulated bank',
};
