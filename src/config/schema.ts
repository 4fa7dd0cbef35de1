import { fileURLToPath } from 'node:url';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { userNameKey } from '../lib/user-name.js';
import { isValidTimeZone } from '../lib/calendar.js';
import { allowEntryProblem } from '../lib/hosts.js';
import { PG_SSL_MODES, pgSettingsProblems } from './postgres.js';

/** The generic mapping set shipped with the package (src/config or dist/config → ../../mappings). */
export const SHIPPED_GENERIC_MAPPINGS = fileURLToPath(new URL('../../mappings/generic', import.meta.url));

/**
 * Builders that carry the "expected …" half of an error message; the loader adds the key path and
 * the value it got, e.g. `platform.rateLimit.readsPerWindow: expected integer ≥ 1, got "fast"`.
 */
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => {
  const expected = `expected integer ≥ ${min}${max < Number.MAX_SAFE_INTEGER ? ` and ≤ ${max}` : ''}`;
  return z
    .number({ error: expected })
    .int({ error: expected })
    .min(min, { error: expected })
    .max(max, { error: expected });
};
const str = (what = 'non-empty string') =>
  z.string({ error: `expected ${what}` }).min(1, { error: `expected ${what}` });
const bool = () => z.boolean({ error: 'expected true or false' });
const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.join(', ')}` });

const rateLimitSchema = z.strictObject({
  readsPerWindow: int(1).default(100),
  writesPerWindow: int(1).default(30),
  windowMs: int(100).default(60_000),
  /** Fraction of the documented budget the client allows itself. */
  headroom: z
    .number({ error: 'expected number > 0 and ≤ 1' })
    .gt(0, { error: 'expected number > 0 and ≤ 1' })
    .max(1, { error: 'expected number > 0 and ≤ 1' })
    .default(0.9),
});

/** platform.timeouts when the config gives none. */
export const DEFAULT_PLATFORM_TIMEOUTS = { connectMs: 10_000, headersMs: 30_000, bodyMs: 60_000 } as const;

export const platformSchema = z.strictObject({
  baseUrl: z
    .url({ error: 'expected an http(s) URL ending in /api' })
    .refine((u) => /^https?:\/\//.test(u) && new URL(u).pathname.replace(/\/+$/, '').endsWith('/api'), {
      error: 'expected an http(s) URL whose path ends in /api (paths /public/v1/... are appended)',
    }),
  apiKey: z
    .string({ error: 'expected an API key (pk_live_… or pk_test_…); set it here or in BOARDING_API_KEY' })
    .regex(/^pk_(live|test)_[A-Za-z0-9_-]+$/, {
      error: 'expected an API key starting with pk_live_ or pk_test_',
    }),
  environment: oneOf(['production', 'staging', 'development']),
  rateLimit: rateLimitSchema.prefault({}),
  timeouts: z
    .strictObject({
      connectMs: int(1).default(DEFAULT_PLATFORM_TIMEOUTS.connectMs),
      headersMs: int(1).default(DEFAULT_PLATFORM_TIMEOUTS.headersMs),
      bodyMs: int(1).default(DEFAULT_PLATFORM_TIMEOUTS.bodyMs),
    })
    .prefault({}),
  maxRetries: int(0, 20).default(5),
  pageSize: int(1, 100).default(100),
});

/** store.postgres: the state on PostgreSQL (store.engine: postgres; docs/deploy.md "PostgreSQL"). */
export const storePostgresSchema = z.strictObject({
  /**
   * postgres://user@host:5432/db without a password (it goes in BOARDING_STORE_PASSWORD or password)
   * nor TLS parameters (ssl decides).
   */
  url: str('a postgres:// URL')
    .refine((v) => /^postgres(ql)?:\/\//.test(v), { error: 'expected a postgres:// or postgresql:// URL' })
    .optional(),
  /** The role's password (or BOARDING_STORE_PASSWORD); never also in the URL. */
  password: str('a password').optional(),
  /**
   * TLS to the server, decided here only (a URL's sslmode that disagrees is a config error):
   * verify-full (default: encrypted, certificate chain and host name checked), verify-ca (chain
   * only), require (encrypted, unchecked), disable (a local socket only).
   */
  ssl: oneOf(PG_SSL_MODES).default('verify-full'),
  /** A CA bundle (PEM file) for verify-full / verify-ca, when the server's certificate is not from a public CA. */
  sslRootCert: str('a file path').optional(),
  /**
   * Why verify-ca (the chain checked, not the host name) is acceptable for this server: required with
   * platform.environment: production for a server that is not on this host (src/config/security.ts).
   */
  verifyCaReason: str('a sentence: why the host name cannot be verified').optional(),
  poolSize: int(1, 100).default(5),
  /**
   * How long a connection attempt waits for the server; then every command exits 1 naming the key to
   * fix (run waits, /readyz 503).
   */
  connectTimeoutMs: int(100).default(5_000),
});

export const storeSchema = z
  .strictObject({
    /** sqlite (default): one file, store.path. postgres: a server shared by replicas, store.postgres. */
    engine: oneOf(['sqlite', 'postgres']).default('sqlite'),
    path: str('a file path').default('./var/state.sqlite'),
    postgres: storePostgresSchema.prefault({}),
    /**
     * PostgreSQL: this host's clock may differ from the database's by less than this; at or above
     * it /readyz fails (check `clock`) and `config check --connect` says so (docs/deploy.md).
     */
    maxClockSkewMs: int(100).default(30_000),
    /**
     * Who boards when several replicas share the state (docs/deploy.md "Leadership"): one leader
     * at a time, on a lease of ttlMs (the database's clock) renewed every renewEveryMs; a standby
     * polls as often and takes over the moment the lease expires. 6 s / 1.5 s since issue 44
     * (failover ≤ 10 s after a kill -9; docs/operations.md has the measurements).
     */
    leadership: z
      .strictObject({
        ttlMs: int(1000).default(6_000),
        renewEveryMs: int(100).default(1_500),
      })
      .prefault({})
      .refine((l) => l.ttlMs - Math.min(2_000, Math.floor(l.ttlMs / 5)) > l.renewEveryMs, {
        error:
          'renewEveryMs must be shorter than ttlMs less its safety margin (min(2000, ttlMs/5)): a leader ' +
          'must renew before it stops trusting its lease',
        path: ['renewEveryMs'],
      }),
  })
  .superRefine((s, ctx) => {
    // Never a silent fall-back to SQLite: engine postgres without a server is a config error.
    if (s.engine === 'postgres' && s.postgres.url === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['postgres', 'url'],
        message: 'expected a postgres:// URL (required when store.engine is postgres)',
      });
    }
    if (s.postgres.url !== undefined) {
      for (const [key, message] of pgSettingsProblems({ ...s.postgres, url: s.postgres.url }))
        ctx.addIssue({ code: 'custom', path: ['postgres', key], message });
    }
  });

/** Mambu credentials: an API key (the `apiKey` header) or a user's HTTP Basic login. */
const mambuAuthSchema = z.union(
  [
    z.strictObject({ apiKey: str('an API key (or BOARDING_CORE_API_KEY)') }),
    z.strictObject({ username: str('a user name'), password: str('a password (or BOARDING_CORE_PASSWORD)') }),
  ],
  { error: 'expected { apiKey } or { username, password }' },
);

/** core.mambu: Mambu API v2 (docs/core.md "Mambu"). */
export const mambuSchema = z.strictObject({
  /** The tenant's API base, e.g. https://bank.mambu.com/api (paths /clients, /loans… are appended). */
  baseUrl: z.url({ error: 'expected the Mambu API URL, e.g. https://bank.mambu.com/api' }),
  auth: mambuAuthSchema,
  /** Other credentials for the disbursement: Mambu may refuse a disbursement by the user who approved. */
  disburseAuth: mambuAuthSchema.optional(),
  approve: bool().default(false),
  disburse: bool().default(false),
  /** Branch (encodedKey or id) for new clients, groups and loans when the mapping names none. */
  branchKey: str('a branch id or encodedKey').optional(),
  /** Where the tax id lives, for the customer match's search: <customFieldSetId>.<customFieldId>. */
  taxIdField: z
    .strictObject({
      clients: z
        .string()
        .regex(/^_[A-Za-z0-9_]+\.[A-Za-z0-9_]+$/, {
          error: 'expected <customFieldSetId>.<customFieldId>, e.g. _taxInformation_Clients.taxId',
        })
        .default('_taxInformation_Clients.taxId'),
      groups: z
        .string()
        .regex(/^_[A-Za-z0-9_]+\.[A-Za-z0-9_]+$/, {
          error: 'expected <customFieldSetId>.<customFieldId>, e.g. _taxInformation_Groups.taxId',
        })
        .default('_taxInformation_Groups.taxId'),
    })
    .prefault({}),
  /** The loan custom field (<customFieldSetId>.<customFieldId>) that holds the platform loan id. */
  loanRefField: z
    .string()
    .regex(/^_[A-Za-z0-9_]+\.[A-Za-z0-9_]+$/, {
      error: 'expected <customFieldSetId>.<customFieldId>, e.g. _boarding_Loans.platformLoanId',
    })
    .default('_boarding_Loans.platformLoanId'),
  /**
   * The tenant's time zone (IANA), in which Mambu's date-time fields (expectedDisbursementDate,
   * firstRepaymentDate) are sent with that day's offset; default: bank.timeZone. `config check
   * --connect` compares it with the tenant's own (GET /setup/organization timeZoneID).
   */
  timeZone: str('an IANA time zone, e.g. America/Chicago')
    .refine(isValidTimeZone, { error: 'expected an IANA time zone, e.g. America/Chicago' })
    .optional(),
  timeoutMs: int(1).default(30_000),
  insecureTls: bool().default(false),
  /** The largest answer read from Mambu (bytes); reading stops there with an error naming this key. */
  maxResponseBytes: int(1024).default(8 * 1024 * 1024),
  /** Mambu's document upload cap (bytes); a larger document follows documents.refused. */
  documents: z
    .strictObject({
      maxBytes: int(1).default(50 * 1024 * 1024),
      refused: oneOf(['skip', 'quarantine']).default('skip'),
    })
    .prefault({}),
});
export type MambuConfig = z.infer<typeof mambuSchema>;

/**
 * `http` is the Apache Fineract adapter (the only profile of core.http); `fineract` is accepted as
 * its name too, and read as `http` (a new user writes the core's name, issue 42).
 */
export const CORE_ADAPTER_ALIASES: Readonly<Record<string, 'http'>> = { fineract: 'http' };

export const coreSchema = z.strictObject({
  adapter: z
    .preprocess(
      (v) => (typeof v === 'string' ? (CORE_ADAPTER_ALIASES[v] ?? v) : v),
      z.enum(['file', 'http', 'mambu'], {
        error: 'expected one of file, http (Apache Fineract; `fineract` is read as http), mambu',
      }),
    )
    .default('file'),
  file: z
    .strictObject({
      dir: str('a directory path').default('./var/core'),
      /** Also write sealed batch files in the mapping set's layout (layout.yaml); docs/core.md. */
      csvBatches: bool().default(true),
      batch: z
        .strictObject({
          /** Daily cut-off, HH:MM in bank.timeZone: the open batch is sealed then. */
          cutoff: z
            .string()
            .regex(/^([01]\d|2[0-3]):[0-5]\d$/, {
              error: 'expected a time of day HH:MM (24 h), e.g. "18:00"',
            })
            .default('18:00'),
          /** Seal every N minutes instead (wins over cutoff). */
          intervalMinutes: int(1, 7 * 24 * 60).optional(),
          /** Written last into a sealed batch's directory: the import job waits for it. */
          triggerFile: z
            .string()
            .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { error: 'expected a plain file name, e.g. READY' })
            .default('READY'),
        })
        .prefault({}),
    })
    .prefault({}),
  http: z
    .strictObject({
      profile: oneOf(['fineract']).default('fineract'),
      baseUrl: z.url({
        error: 'expected the core API URL, e.g. https://core.bank.local/fineract-provider/api/v1',
      }),
      username: str(),
      password: str(),
      tenantId: str().default('default'),
      officeId: int(1).default(1),
      timeoutMs: int(1).default(30_000),
      approve: bool().default(false),
      disburse: bool().default(false),
      insecureTls: bool().default(false),
      /** The largest answer read from Fineract (bytes); reading stops there with an error naming this key. */
      maxResponseBytes: int(1024).default(8 * 1024 * 1024),
      /** Documents Fineract would refuse (type outside its whitelist, over its upload cap). */
      documents: z
        .strictObject({
          maxBytes: int(1).default(5 * 1024 * 1024),
          refused: oneOf(['skip', 'quarantine']).default('skip'),
          refusedByType: z
            .record(z.string(), oneOf(['skip', 'quarantine']), {
              error: 'expected a map of file type (csv, text/plain…) → skip | quarantine',
            })
            .default({}),
        })
        .prefault({}),
    })
    .optional(),
  mambu: mambuSchema.optional(),
});

/**
 * Documents to the bank's imaging system (issue 45, docs/imaging.md): index-file batches in a
 * folder the imaging importer polls, after the core write and before the acknowledgement. Off by default.
 */
export const imagingSchema = z.strictObject({
  enabled: bool().default(false),
  /** The folder the importer polls (a share the importer's Windows host reads). */
  dir: str('a directory path').default('./var/imaging'),
  /** Documents wait here until their batch is written; default: `.imaging-staging` beside dir. */
  stagingDir: str('a directory path').optional(),
  /** The index layout: a file of the mapping set (mappings.dir), e.g. imaging/onbase-tagged.yaml. */
  layout: str('a file of the mapping set, e.g. imaging/onbase-tagged.yaml').default(
    'imaging/onbase-tagged.yaml',
  ),
  batch: z
    .strictObject({
      /** loan: one folder per loan, written before its ack; batch: a folder per cut-off or size. */
      mode: oneOf(['loan', 'batch']).default('loan'),
      cutoff: z
        .string()
        .regex(/^([01]\d|2[0-3]):[0-5]\d$/, { error: 'expected a time of day HH:MM (24 h), e.g. "18:00"' })
        .default('18:00'),
      intervalMinutes: int(1, 7 * 24 * 60).optional(),
      /** batch mode: a batch holding this many documents is written at once. */
      maxDocuments: int(1).default(500),
    })
    .prefault({}),
  /**
   * A batch folder whose ready marker is older than this is "not being drained" (the importer has
   * stopped): /readyz's imaging check fails and boarding_imaging_stale_batches counts it.
   */
  staleAfter: z
    .string()
    .regex(/^[1-9]\d*(s|m|h)$/, { error: 'expected a duration such as "30m", "2h" or "90s"' })
    .default('30m'),
  /** Written last into a batch folder: the importer takes a folder once it exists, and deletes it last. */
  readyFile: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { error: 'expected a plain file name, e.g. READY' })
    .default('READY'),
});
export type ImagingConfig = z.infer<typeof imagingSchema>;

/** `imaging.staleAfter` in milliseconds ("30m" → 1 800 000). */
export function imagingStaleAfterMs(value: string): number {
  const n = Number(value.slice(0, -1));
  const unit = value.slice(-1);
  return n * (unit === 'h' ? 3_600_000 : unit === 'm' ? 60_000 : 1000);
}

export const webhooksSchema = z.strictObject({
  host: str('a host name or IP').default('127.0.0.1'),
  port: int(0, 65535).default(8080),
  secrets: z
    .array(str('a signing secret (whsec_…)'), { error: 'expected a list of signing secrets' })
    .default([]),
  scheme: oneOf(['standard', 'svix', 'stripe', 'hmac-sha256-hex']).default('standard'),
  toleranceSeconds: int(1).default(300),
  maxBodyBytes: int(1024).default(262_144),
  /** The public HTTPS URL the platform delivers to; used to find our endpoint in the list. */
  publicUrl: z.url({ error: 'expected an https URL' }).optional(),
  /** How long to wait after a loan.funded event before an early cycle (collapses bursts). */
  debounceMs: int(0).default(2_000),
  /** Open connections the receiver keeps at most, and from one client address. */
  maxConnections: int(1).default(1024),
  maxConnectionsPerClient: int(1).default(128),
  /** A delivery's headers must arrive within this, the whole request within requestTimeoutMs. */
  headersTimeoutMs: int(100).default(10_000),
  requestTimeoutMs: int(100).default(20_000),
  /**
   * An idle keep-alive connection is closed after this: one cheap request per connection must not
   * hold a client's connection slots for a minute (the platform opens a new connection anyway).
   */
  keepAliveTimeoutMs: int(100).default(5_000),
});

/**
 * The ops listener: /readyz, /metrics and /reports/latest (and /healthz). Separate from the
 * webhook receiver, which the platform must reach and a deployment exposes; these pages show loan
 * data and operational state, so they stay on loopback unless the bank opens them on purpose.
 */
const HOST_NAME_OR_IP =
  /^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:]*:[0-9a-fA-F:.]*|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9.])?)$/;

export const adminSchema = z.strictObject({
  host: str('a host name or IP').default('127.0.0.1'),
  port: int(0, 65535).default(8081),
  /**
   * Host names (or IPs, or address ranges matched by address literals) the listener answers in the
   * Host header, without port; any other gets 421 (DNS rebinding). Default: localhost, 127.0.0.1,
   * ::1 and admin.host when it names one address.
   */
  allowedHosts: z
    .array(
      z
        .string({ error: 'expected a host name' })
        .refine((v) => HOST_NAME_OR_IP.test(v) || ipaddr.isValidCIDR(v), {
          error:
            'expected a host name or IP without port, e.g. ops.bank.example (or an address range, e.g. 10.0.0.0/8)',
        }),
      { error: 'expected a list of host names' },
    )
    .optional(),
});

export const mappingsSchema = z.strictObject({
  /** Default: the shipped generic set, wherever the connector runs from. */
  dir: str('a directory path').default(SHIPPED_GENERIC_MAPPINGS),
  /** Allow boarding with only the last 4 digits of a tax id (otherwise: tin_incomplete). */
  allowLast4Tin: bool().default(false),
  /** Bank defaults available to expressions as $defaults (branch, officer, GL codes…). */
  defaults: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]), {
      error: 'expected a map of names to values',
    })
    .default({}),
  timeoutMs: int(1).default(1_000),
  /**
   * `run` reloads the set when a file in dir changes (lint first; a broken edit keeps the loaded set).
   * SIGHUP always reloads.
   */
  watch: bool().default(false),
  /**
   * Input paths the platform spec does not document that lint lets pass (fields a platform adds
   * later): true for all, or a list such as [person.middleName, loan.*].
   */
  allowUnknownInput: z
    .union(
      [
        bool(),
        z.array(
          z
            .string()
            .regex(
              /^(loan|loan\.product|loan\.stage|loan\.boarding|business|person|document|document\.requirement)\.([A-Za-z_$][\w$]*|\*)$/,
              {
                error:
                  'expected <object>.<field>, e.g. person.middleName or loan.* (objects: loan, ' +
                  'loan.product, loan.stage, loan.boarding, business, person, document, ' +
                  'document.requirement)',
              },
            ),
        ),
      ],
      { error: 'expected true, false or a list of <object>.<field>' },
    )
    .default(false),
});

export const bankSchema = z.strictObject({
  /** IANA zone in which core dates are derived from the platform's date-times. */
  timeZone: str('an IANA time zone, e.g. America/Chicago')
    .refine(isValidTimeZone, { error: 'expected an IANA time zone, e.g. America/Chicago' })
    .default('America/Chicago'),
});

export const scheduleSchema = z.strictObject({
  drain: str('a cron expression').default('* * * * *'),
  reconcile: str('a cron expression').default('30 2 * * *'),
  endpointCheck: str('a cron expression').default('*/15 * * * *'),
});

export const boardingSchema = z.strictObject({
  concurrency: int(1, 64).default(4),
  maxAttempts: int(1).default(10),
  retryBaseMs: int(1).default(30_000),
  retryMaxMs: int(1).default(6 * 60 * 60_000),
  documentMaxBytes: int(1).default(50 * 1024 * 1024),
  /** A document's whole download must finish within this (a 1 byte/s drip passes idle timeouts). */
  documentDeadlineMs: int(1000).default(10 * 60_000),
  shutdownTimeoutMs: int(0).default(30_000),
  /**
   * Free space the state directory (SQLite) and core.file.dir must keep: below it the daemon starts
   * no cycle, /readyz fails (check `disk`) and an ALERT is logged once a minute, until space
   * returns (docs/operations.md "When things break"). 0 turns the check off.
   */
  minFreeDiskMb: z
    .number({ error: 'expected a number of MiB' })
    .min(0, { error: 'expected 0 or more MiB' })
    .default(64),
  /**
   * Where presigned document addresses may lead. Downloads never connect to a loopback, private,
   * link-local, metadata or other special-purpose address (checked on the resolved address)
   * unless its host name (`docs.bank.internal`, `*.bank.internal`), address or CIDR is listed
   * here. With platform.environment: development (the local sandbox) loopback is also allowed.
   */
  documentHosts: z
    .strictObject({
      allow: z
        .array(
          z.string({ error: 'expected a host name, *.domain, address or CIDR' }).superRefine((v, ctx) => {
            const problem = allowEntryProblem(v.trim());
            if (problem !== null)
              ctx.addIssue({
                code: 'custom',
                message: `expected a host name, *.domain, address or CIDR (${problem})`,
              });
          }),
          { error: 'expected a list of host names, addresses or CIDRs' },
        )
        .default([]),
    })
    .prefault({}),
  /** `loans reboard`, `loans retry`, `loans skip` on more loans than this ask first (or need --yes). */
  confirmAbove: int(0).default(10),
});

export const reportsSchema = z.strictObject({
  dir: str('a directory path').default('./var/reports'),
  fundedNotReleasedDays: int(0).default(5),
});

const extractColumn = z.union([str('a header name'), int(1)], {
  error: 'expected a header name or a column position (1, 2, …)',
});

/** Customer match before create (docs/core.md "Customer match"). */
export const customersSchema = z.strictObject({
  /** One tax id, two or more CIFs in the core: quarantine (customer_match_ambiguous) or create a new customer. */
  onAmbiguous: oneOf(['quarantine', 'create']).default('quarantine'),
  /**
   * HMAC key of the tax id hashes kept in the state database (or BOARDING_TIN_HASH_KEY). A secret.
   * Required with store.engine: postgres (every replica the same key); on SQLite, without it the
   * connector generates one into <store.path>.tinkey (0600) on first use.
   */
  tinHashKey: z
    .string({ error: 'expected a secret of at least 16 characters' })
    .min(16, { error: 'expected a secret of at least 16 characters' })
    .optional(),
  /** File core: the bank's customer extract (CIF, tax id, name); absent: only the connector's own customers match. */
  extract: z
    .strictObject({
      path: str('a file path'),
      /** An extract older than this makes loans wait (never "no existing customer"). */
      maxAgeHours: z
        .number({ error: 'expected a number of hours > 0' })
        .gt(0, { error: 'expected a number of hours > 0' })
        .default(36),
      layout: z
        .strictObject({
          header: bool().default(true),
          delimiter: z
            .string({ error: 'expected one character' })
            .length(1, { error: 'expected one character' })
            .default(','),
          columns: z
            .strictObject({
              cif: extractColumn.default('cif'),
              tin: extractColumn.default('tin'),
              name: extractColumn.default('name'),
              birthOrFormationDate: extractColumn.optional(),
            })
            .prefault({}),
        })
        .prefault({}),
    })
    .optional(),
});

/** A console user's password hash as `console passwd` prints it (scrypt, encoded parameters and salt). */
export const PASSWORD_HASH_PATTERN =
  /^scrypt\$ln=\d{1,2},r=\d{1,2},p=\d{1,2}\$[A-Za-z0-9+/]{16,}={0,2}\$[A-Za-z0-9+/]{43,}={0,2}$/;

/**
 * The ops console on the admin listener (/console/, /console/api/; docs/operations.md "Ops console").
 * On when at least one user is configured or a trusted proxy names users.
 */
export const consoleSchema = z.strictObject({
  users: z
    .array(
      z.strictObject({
        name: z.string({ error: 'expected a user name' }).regex(/^[A-Za-z0-9._@-]{1,64}$/, {
          error: 'expected a user name of 1–64 letters, digits, . _ @ -',
        }),
        /** From `boarding-connector console passwd`; absent: the user can only come through the trusted proxy. */
        passwordHash: z
          .string({ error: 'expected a hash printed by `node dist/main.js console passwd`' })
          .regex(PASSWORD_HASH_PATTERN, {
            error: 'expected a hash printed by `node dist/main.js console passwd` (scrypt$ln=…)',
          })
          .optional(),
        roles: z
          .array(oneOf(['viewer', 'operator', 'approver']), {
            error: 'expected a list of roles (viewer, operator, approver)',
          })
          .min(1, { error: 'expected at least one role (viewer, operator, approver)' }),
      }),
      { error: 'expected a list of users { name, passwordHash, roles }' },
    )
    .default([])
    .superRefine((users, ctx) => {
      // One person, one name: olga, Olga and olga. would be three users (and three throttles).
      const seen = new Map<string, string>();
      users.forEach((u, i) => {
        const key = userNameKey(u.name);
        const first = seen.get(key);
        if (key === '')
          ctx.addIssue({
            code: 'custom',
            path: [i, 'name'],
            message: `expected a user name with a letter or digit (${u.name} is only punctuation)`,
          });
        else if (first !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: [i, 'name'],
            message:
              first === u.name
                ? `expected each user once (${u.name} is listed twice)`
                : `expected each user once: ${u.name} is the same user as ${first} ` +
                  '(names are compared without case and surrounding punctuation)',
          });
        else seen.set(key, u.name);
      });
    }),
  fourEyes: z
    .strictObject({
      /** Retry requests execute at once, without a second person (skip, re-board, seal, strike clear still wait). */
      exemptRetries: bool().default(false),
    })
    .prefault({}),
  /**
   * A reverse proxy that authenticates users and names them in a header. The header is believed
   * only on connections from `addresses` (IPs or CIDRs); from anywhere else it is ignored. The
   * named user must be in `users` (their roles apply).
   */
  proxy: z
    .strictObject({
      userHeader: z
        .string({ error: 'expected a header name, e.g. X-Forwarded-User' })
        .regex(/^[A-Za-z0-9-]{1,64}$/, { error: 'expected a header name, e.g. X-Forwarded-User' }),
      addresses: z
        .array(
          z.string({ error: 'expected an IP address or CIDR' }).superRefine((v, ctx) => {
            const problem = allowEntryProblem(v.trim());
            if (problem !== null || !/^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(v.trim()))
              ctx.addIssue({
                code: 'custom',
                message: 'expected an IP address or CIDR, e.g. 10.0.0.5 or 10.0.0.0/24',
              });
          }),
          { error: 'expected a list of IP addresses or CIDRs' },
        )
        .min(1, { error: 'expected at least one proxy address' }),
    })
    .optional(),
  /** A browser session ends after this many idle minutes. */
  sessionIdleMinutes: int(1, 24 * 60).default(30),
  /**
   * Failed logins (Basic auth and the login form): after `maxFailures` for one user name from one
   * client address in the window, that name is locked from that address (others and other names
   * go on); after `maxFailuresPerUser` for the name from any addresses, the name is locked
   * everywhere. A lock ends after the window, or when an approver (status page) or `console
   * unlock NAME` lifts it.
   */
  loginThrottle: z
    .strictObject({
      maxFailures: int(1).default(5),
      maxFailuresPerUser: int(1).default(20),
      windowSeconds: int(1).default(900),
    })
    .prefault({}),
  /**
   * A password hash weaker than OWASP's scrypt parameters (N=2^17, r=8, p=1: older `console passwd`
   * printed N=2^15) is re-hashed at the user's next login and kept in the state database; the
   * config's hash is still accepted until it changes. false: verify the config's hash only.
   */
  upgradeHashes: bool().default(true),
  /** How long an approval waits for its execution before it answers `approved` (the executor carries on). */
  approveWaitMs: int(0, 60_000).default(5_000),
});
export type ConsoleConfig = z.infer<typeof consoleSchema>;

/**
 * OpenTelemetry traces (docs/operations.md "Traces"): off unless `otlp.endpoint` is set here or the
 * standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT is in the environment
 * (src/observability/tracing.ts). A collector's credentials go in OTEL_EXPORTER_OTLP_HEADERS, never here.
 */
export const telemetrySchema = z.strictObject({
  otlp: z
    .strictObject({
      /** The collector's OTLP/HTTP base URL (e.g. http://otel-collector:4318); /v1/traces is appended. */
      endpoint: z
        .url({
          protocol: /^https?$/,
          error: 'expected the http(s) URL of an OTLP/HTTP collector, e.g. http://otel-collector:4318',
        })
        .refine((u) => !/^[a-z]+:\/\/[^/]*@/i.test(u), {
          error:
            'expected no user or password in the URL: give the collector its credentials in ' +
            'OTEL_EXPORTER_OTLP_HEADERS (the environment), never in the config file',
        })
        .optional(),
      /** One export call's deadline; a collector slower than this costs the batch, never a board. */
      timeoutMs: int(100, 60_000).default(5_000),
      /** Spans waiting for export; past it new spans are dropped (boarding_trace_spans_dropped_total). */
      maxQueueSize: int(16, 100_000).default(2_048),
    })
    .prefault({}),
  sampling: z
    .strictObject({
      /**
       * Share of cycles and loan boards traced (0 to 1): each root (cycle, loan board) is sampled on
       * its own; its children follow it.
       */
      ratio: z
        .number({ error: 'expected a number from 0 to 1' })
        .min(0, { error: 'expected a number from 0 to 1' })
        .max(1, { error: 'expected a number from 0 to 1' })
        .default(1),
    })
    .prefault({}),
  /** service.name on every span (OTEL_SERVICE_NAME, when set, wins). */
  serviceName: str('a service name, e.g. boarding-connector').default('boarding-connector'),
});
export type TelemetryConfig = z.infer<typeof telemetrySchema>;

export const logSchema = z.strictObject({
  level: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

/**
 * A pool of the bank's own numbers (docs/core.md "Account and customer numbers"): sequences taken
 * from `ranges` in the order listed, each once, zero-padded to fill `width` after `prefix`, with a
 * check digit appended. Validated here so a pool that cannot produce a number fails at start-up.
 */
const digitString = z
  .string({ error: 'expected a string of digits, e.g. "1000000" (quoted)' })
  .regex(/^\d{1,30}$/, { error: 'expected a string of 1 to 30 digits, e.g. "1000000" (quoted)' });
export const numberPoolSchema = z
  .strictObject({
    ranges: z
      .array(z.strictObject({ from: digitString, to: digitString }), {
        error: 'expected a list of { from, to } digit strings',
      })
      .min(1, { error: 'expected at least one { from, to } range' }),
    prefix: z
      .string({ error: 'expected a string' })
      .regex(/^[A-Za-z0-9]*$/, { error: 'expected letters and digits only (or "")' })
      .default(''),
    width: int(1, 34),
    checkDigit: oneOf(['luhn', 'mod11', 'none']).default('luhn'),
    warnAt: z
      .number({ error: 'expected number > 0 and ≤ 1' })
      .gt(0, { error: 'expected number > 0 and ≤ 1' })
      .max(1, { error: 'expected number > 0 and ≤ 1' })
      .default(0.9),
  })
  .superRefine((pool, ctx) => {
    const checkLen = pool.checkDigit === 'none' ? 0 : 1;
    const digits = pool.width - pool.prefix.length - checkLen;
    if (digits < 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['width'],
        message:
          `expected a width larger than the prefix${checkLen ? ' and the check digit' : ''} ` +
          `(${pool.prefix.length + checkLen})`,
      });
      return;
    }
    if (checkLen && !/^\d*$/.test(pool.prefix)) {
      ctx.addIssue({
        code: 'custom',
        path: ['prefix'],
        message:
          `expected digits only: the ${pool.checkDigit} check digit covers the prefix (use checkDigit: ` +
          'none for a prefix with letters)',
      });
    }
    const spans: Array<[bigint, bigint, number]> = [];
    pool.ranges.forEach((r, i) => {
      const from = BigInt(r.from);
      const to = BigInt(r.to);
      if (from > to)
        ctx.addIssue({
          code: 'custom',
          path: ['ranges', i, 'to'],
          message: `expected to ≥ from (${r.from})`,
        });
      if (to.toString().length > digits) {
        ctx.addIssue({
          code: 'custom',
          path: ['ranges', i, 'to'],
          message:
            `expected at most ${digits} digit(s): width ${pool.width} leaves ${digits} after the ` +
            `prefix${checkLen ? ' and the check digit' : ''}`,
        });
      }
      spans.push([from, to, i]);
    });
    spans.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (let k = 1; k < spans.length; k++) {
      const prev = spans[k - 1] as [bigint, bigint, number];
      const cur = spans[k] as [bigint, bigint, number];
      if (cur[0] <= prev[1])
        ctx.addIssue({
          code: 'custom',
          path: ['ranges', cur[2]],
          message: `expected ranges that do not overlap (overlaps range ${prev[2] + 1})`,
        });
    }
  });
export type NumberPoolConfig = z.infer<typeof numberPoolSchema>;

const numberSourceSchema = (defaultPool: z.input<typeof numberPoolSchema>) =>
  z.strictObject({
    /**
     * pool: the connector allocates from `pool`; core: the core assigns it. Default: pool for the file
     * core, core for http (Fineract).
     */
    source: oneOf(['pool', 'core']).optional(),
    pool: numberPoolSchema.prefault(defaultPool),
  });

export const identitySchema = z.strictObject({
  /** The loan's core account number. */
  accountNumbers: numberSourceSchema({
    ranges: [{ from: '100000000', to: '999999999' }],
    width: 10,
    checkDigit: 'luhn',
  }).prefault({}),
  /** The CIF of a new customer when the core does not assign it. */
  customerNumbers: numberSourceSchema({
    ranges: [{ from: '10000000', to: '99999999' }],
    width: 9,
    checkDigit: 'luhn',
  }).prefault({}),
});
export type IdentityConfig = z.infer<typeof identitySchema>;

export const configSchema = z
  .strictObject({
    platform: platformSchema,
    store: storeSchema.prefault({}),
    core: coreSchema.prefault({}),
    webhooks: webhooksSchema.prefault({}),
    admin: adminSchema.prefault({}),
    mappings: mappingsSchema.prefault({}),
    bank: bankSchema.prefault({}),
    schedule: scheduleSchema.prefault({}),
    boarding: boardingSchema.prefault({}),
    reports: reportsSchema.prefault({}),
    customers: customersSchema.prefault({}),
    log: logSchema.prefault({}),
    telemetry: telemetrySchema.prefault({}),
    identity: identitySchema.prefault({}),
    console: consoleSchema.prefault({}),
    imaging: imagingSchema.prefault({}),
  })
  .superRefine((c, ctx) => {
    // Replicas on PostgreSQL must hash tax ids with one key: a key generated per host (beside a
    // store.path PostgreSQL does not use) made the second replica refuse to start (issue 33).
    if (c.store.engine === 'postgres' && c.customers.tinHashKey === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['customers', 'tinHashKey'],
        message:
          'required when store.engine is postgres (or BOARDING_TIN_HASH_KEY): every replica hashes tax ' +
          'ids with this one key, at least 16 characters from your secret store; `state migrate` prints ' +
          'the value an SQLite state used',
      });
    }
  });

export type Config = z.infer<typeof configSchema>;
export type PlatformConfig = Config['platform'];
export type CoreConfig = Config['core'];
export type WebhooksConfig = Config['webhooks'];
export type MappingsConfig = Config['mappings'];
export type CustomersConfig = Config['customers'];

/**
 * Where a number comes from when the config does not say: the file core has no numbering of its own;
 * Fineract assigns accountNo.
 */
export function numberSource(
  config: Pick<Config, 'core' | 'identity'>,
  which: 'accountNumbers' | 'customerNumbers',
): 'pool' | 'core' {
  return config.identity[which].source ?? (config.core.adapter === 'file' ? 'pool' : 'core');
}
