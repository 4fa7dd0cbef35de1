/**
 * The simulated Fineract tenant's setup: credentials, offices, loan products, client identifier
 * types, the document cap. DEFAULT_FINERACT_TENANT fits the shipped `mappings/fineract` set (office
 * 1, products 1–4 of its productId lookup, identifier code values 2 = EIN and 3 = SSN of its
 * defaults), so the sandbox's loans board into it as they are; the tests and `sandbox --core
 * fineract` start from the same one.
 */

export interface FineractProductSetup {
  name?: string;
  isFloatingInterestRate?: boolean;
  holdGuaranteeFunds?: boolean;
  minPrincipal?: number;
  maxPrincipal?: number;
}

export interface FineractOfficeSetup {
  id: number;
  name: string;
  /** yyyy-mm-dd: Fineract refuses a client activated before its office opened. */
  openingDate: string;
}

export interface FineractTenantSetup {
  username: string;
  password: string;
  tenantId: string;
  offices: FineractOfficeSetup[];
  /** Loan products by id. */
  products: Record<number, FineractProductSetup>;
  /** Code value ids of the "Customer Identifier" code. */
  identifierTypes: number[];
  /** Fineract's default document upload cap (5 MiB). */
  documentMaxBytes: number;
}

export const DEFAULT_FINERACT_TENANT: FineractTenantSetup = {
  username: 'mifos',
  password: 'password',
  tenantId: 'default',
  offices: [{ id: 1, name: 'Head Office', openingDate: '2009-01-01' }],
  products: {
    1: { name: 'Equipment loan' },
    2: { name: 'SBA 7(a) and lines of credit' },
    3: { name: 'Commercial real estate' },
    4: { name: 'Personal loan' },
  },
  identifierTypes: [1, 2, 3],
  documentMaxBytes: 5 * 1024 * 1024,
};
