/**
 * Schema migrations, one history for both engines (issue 26), applied in order: SQLite counts them
 * in `PRAGMA user_version`, PostgreSQL in store_schema_version (db-pg.ts). Append only: never edit
 * a migration once it has landed on main; add a new one. A migration is either one portable text
 * (written for SQLite; pgMigrationSql translates its types for PostgreSQL) or one body per engine.
 * Times are epoch milliseconds (INTEGER; BIGINT on PostgreSQL) unless the column says _iso. No full
 * EIN/SSN is ever stored.
 */
export type Migration = string | { sqlite: string; postgres: string };

/** Migration 13's request tables (four eyes), written once: SQLite as is, PostgreSQL through pgMigrationSql. */
const CONSOLE_REQUEST_TABLES = `
  CREATE TABLE console_requests (
    id            TEXT PRIMARY KEY,
    action        TEXT NOT NULL,              -- retry|skip|reboard|seal|strike_clear
    filter        TEXT,                       -- JSON of the exception filter, when made by filter
    batch         TEXT,                       -- seal: the open batch the maker saw
    preview_count INTEGER NOT NULL,           -- loans covered when made (frozen)
    reason        TEXT NOT NULL,
    maker         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    status        TEXT NOT NULL,              -- pending|approved|executed|rejected|failed
    decided_by    TEXT,
    decided_at    INTEGER,
    decision_note TEXT,
    claimed_by    TEXT,                       -- the executor running it (one at a time)
    claimed_at    INTEGER,
    executed_at   INTEGER,
    result        TEXT                        -- JSON {done, failed, detail}
  );
  CREATE INDEX console_requests_created ON console_requests (created_at, id);
  CREATE INDEX console_requests_open ON console_requests (status, created_at) WHERE status IN ('pending', 'approved');
  CREATE TABLE console_request_loans (
    request_id TEXT NOT NULL,
    loan_id    TEXT NOT NULL,
    from_state TEXT,                          -- the loan's state when the request was made: it acts only on a loan still in it
    PRIMARY KEY (request_id, loan_id)
  );
  CREATE INDEX console_request_loans_loan ON console_request_loans (loan_id);
`;

export const MIGRATIONS: readonly Migration[] = [
  /* 1: initial schema */ `
  CREATE TABLE loans (
    id                 TEXT PRIMARY KEY,          -- platform loan id (external id in the core)
    loan_number        TEXT,
    state              TEXT NOT NULL,             -- queued|fetched|mapped|written|acknowledged|retry_wait|quarantined|skipped
    quarantine_reason  TEXT,                      -- mapping|validation|core_rejected|tin_incomplete|ambiguous
    attempts           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at    INTEGER,
    last_error_code    TEXT,
    last_error_message TEXT,
    core_reference     TEXT,
    mapping_version    TEXT,
    payload_hash       TEXT,
    release_marker     TEXT,                      -- identifies this release (boarding id / releasedAt)
    cents_amount       INTEGER,
    product_id         TEXT,
    funded_at_iso      TEXT,
    released_at_iso    TEXT,
    boarded_at_iso     TEXT,
    written_at         INTEGER,
    acknowledged_at    INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
  );
  CREATE INDEX loans_state ON loans(state, next_attempt_at);

  CREATE TABLE loan_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    loan_id    TEXT NOT NULL,
    at         INTEGER NOT NULL,
    kind       TEXT NOT NULL,                     -- transition|attempt|ops|webhook
    from_state TEXT,
    to_state   TEXT,
    actor      TEXT NOT NULL DEFAULT 'connector',
    reason     TEXT,
    detail     TEXT                               -- JSON
  );
  CREATE INDEX loan_events_loan ON loan_events(loan_id, seq);

  CREATE TABLE checkpoints (
    name       TEXT PRIMARY KEY,                  -- e.g. boarding-queue
    cursor     TEXT,
    started_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );

  CREATE TABLE idempotency_keys (
    key          TEXT PRIMARY KEY,
    loan_id      TEXT,
    operation    TEXT NOT NULL,                   -- ack|core-write|webhook-endpoint…
    created_at   INTEGER NOT NULL,
    completed_at INTEGER,
    status       INTEGER,
    response     TEXT
  );

  CREATE TABLE rate_spend (
    bucket TEXT NOT NULL,                         -- read|write
    at     INTEGER NOT NULL
  );
  CREATE INDEX rate_spend_bucket_at ON rate_spend(bucket, at);

  CREATE TABLE rate_strikes (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    at             INTEGER NOT NULL,
    bucket         TEXT NOT NULL,
    path           TEXT,
    retry_after_ms INTEGER,
    cleared_at     INTEGER,
    cleared_by     TEXT
  );

  CREATE TABLE rate_pause (
    bucket TEXT PRIMARY KEY,
    until  INTEGER NOT NULL
  );

  CREATE TABLE webhook_inbox (
    webhook_id   TEXT PRIMARY KEY,
    event_type   TEXT NOT NULL,
    loan_id      TEXT,
    occurred_at  INTEGER,
    received_at  INTEGER NOT NULL,
    payload      TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',  -- pending|processed|failed
    processed_at INTEGER,
    error        TEXT
  );
  CREATE INDEX webhook_inbox_pending ON webhook_inbox(status, loan_id, occurred_at);
  `,
  /* 2: boarding pipeline. The queue item (loan + boarding object, no tax ids: those live on
     entities, which are never stored) so a walk resumed from a checkpoint can board loans seen
     before the crash without a second GET; when a core write may have started (after that, the
     core is checked by external id before writing again). */ `
  ALTER TABLE loans ADD COLUMN queue_item TEXT;
  ALTER TABLE loans ADD COLUMN core_write_started_at INTEGER;
  ALTER TABLE loans ADD COLUMN last_seen_at INTEGER;
  `,
  /* 3: leases, so two processes on one state database (the daemon and a `sync --once` run by
     hand) never board at the same time. */ `
  CREATE TABLE leases (
    name         TEXT PRIMARY KEY,                -- e.g. boarding
    owner        TEXT NOT NULL,                   -- host:pid:random, unique per process
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    acquired_at  INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
  );
  `,
  /* 4: which release the core write was made for. A loan re-released after its write (while
     skipped, say) must be written again, not merely acknowledged: only a write for the current
     release marker makes an attempt ack-only. Existing written rows are assumed to be for their
     current marker, except skipped ones (a re-release while skipped kept the old write's columns):
     those write again on retry, which is safe (the core write is idempotent by external id). */ `
  ALTER TABLE loans ADD COLUMN written_release_marker TEXT;
  UPDATE loans SET written_release_marker = release_marker
   WHERE written_at IS NOT NULL AND core_reference IS NOT NULL AND state <> 'skipped';
  `,
  /* 5: narrower webhook inbox indexes. The pending index held every row (status was its first
     column), so marking a row processed moved its entry and the index grew with 30 days of
     processed rows. Now it holds pending rows only, in the order they are processed (no sort),
     and loan.funded rows have their own index by loan (funded-time lookups). Failed rows (rare)
     have one too, so /metrics counts rows by status without scanning the 30-day inbox. */ `
  DROP INDEX IF EXISTS webhook_inbox_pending;
  CREATE INDEX webhook_inbox_pending ON webhook_inbox (COALESCE(occurred_at, received_at), received_at, webhook_id)
    WHERE status = 'pending';
  CREATE INDEX webhook_inbox_funded ON webhook_inbox (loan_id) WHERE event_type = 'loan.funded';
  CREATE INDEX webhook_inbox_failed ON webhook_inbox (received_at) WHERE status = 'failed';
  `,
  /* 6: board with warnings (round 2): how many review items the loan's last mapping had, so
     `loans list --warnings`, /metrics and the report find those loans without reading history. */ `
  ALTER TABLE loans ADD COLUMN review_items INTEGER NOT NULL DEFAULT 0;
  CREATE INDEX loans_review_items ON loans (updated_at) WHERE review_items > 0;
  `,
  /* 7: the running daemon's mapping version (a CLI that boards beside it refuses another one) and
     an operator's request for an early cycle (`loans retry --all`), which the daemon polls for. */ `
  CREATE TABLE daemon_status (
    owner              TEXT PRIMARY KEY,          -- host:pid:random of the daemon (two may share a database)
    pid                INTEGER NOT NULL,
    host               TEXT NOT NULL,
    started_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    mapping_version    TEXT NOT NULL,
    mapping_dir        TEXT NOT NULL,
    reload_error       TEXT,
    cycle_requested_at INTEGER,
    cycle_requested_by TEXT
  );
  `,
  /* 8: the records last written to the core (tax ids masked), so a preview or a dry run can show
     field by field what a mapping change would change for a boarded loan. One value per loan,
     replaced on each write. */ `
  ALTER TABLE loans ADD COLUMN boarded_records TEXT;
  `,
  /* 9: file core batches: one open batch at a time; a loan's rendered lines are stored once
     when it is boarded (append is one row, whatever the batch holds) and the files are written
     once, at the seal. status open → sealing (frozen: new boards go to the next batch) → sealed
     (files, control and trigger file written). */ `
  CREATE TABLE file_batches (
    id             TEXT PRIMARY KEY,           -- <bank day opened>-<nnn>
    status         TEXT NOT NULL,              -- open|sealing|sealed
    opened_at      INTEGER NOT NULL,
    cutoff_at      INTEGER NOT NULL,
    sealing_at     INTEGER,
    sealed_at      INTEGER,
    seal_reason    TEXT,                       -- cutoff | ops: <reason>
    sealed_by      TEXT,
    loan_count     INTEGER,
    record_count   INTEGER,
    principal_cents TEXT,
    layout         TEXT NOT NULL               -- the layout.yaml it is written in (a changed layout opens a new batch)
  );
  CREATE UNIQUE INDEX file_batches_one_open ON file_batches (status) WHERE status = 'open';
  CREATE INDEX file_batches_unsealed ON file_batches (opened_at) WHERE status <> 'sealed';
  CREATE TABLE file_batch_loans (
    batch_id        TEXT NOT NULL REFERENCES file_batches (id),
    loan_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,             -- new|correction
    principal_cents TEXT,
    digest          TEXT NOT NULL,             -- of the rendered rows: an identical re-board is a no-op
    rows_json       TEXT NOT NULL,             -- {file: {lines: [...], amounts: {...}}}; '{}' once sealed
    record_count    INTEGER NOT NULL,
    boarded_at      INTEGER NOT NULL,
    PRIMARY KEY (batch_id, loan_id)
  );
  CREATE INDEX file_batch_loans_loan ON file_batch_loans (loan_id);
  `,
  /* 10: the bank's own numbers (issue 23, src/store/identity/numbers.ts): a loan's core account number and
     a new customer's CIF, one per key forever (UNIQUE(pool, key)), never two keys on one number
     (UNIQUE(pool, number)); a cursor per pool and range records the last sequence consumed. The
     loan row keeps its core account number (from the pool, or read back from the core). */ `
  CREATE TABLE bank_numbers (
    pool         TEXT NOT NULL,                -- account|customer
    key          TEXT NOT NULL,                -- loan id (account), TIN hash (customer)
    number       TEXT NOT NULL,
    allocated_at INTEGER NOT NULL,
    PRIMARY KEY (pool, key),
    UNIQUE (pool, number)
  );
  CREATE TABLE bank_number_cursors (
    pool       TEXT NOT NULL,
    range_from TEXT NOT NULL,                  -- the range's first sequence (decimal, no leading zeros)
    last_seq   TEXT NOT NULL,                  -- the last sequence consumed (issued or skipped)
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (pool, range_from)
  );
  CREATE TABLE bank_number_counts (
    pool      TEXT PRIMARY KEY,
    allocated INTEGER NOT NULL                 -- rows of bank_numbers for the pool (read per scrape without a COUNT)
  );
  ALTER TABLE loans ADD COLUMN account_number TEXT;
  -- A platform id longer than a core's external-reference field goes there as a digest
  -- (src/core/fineract/external-id.ts); the digest → id pairs, so a core listing maps back.
  CREATE TABLE core_external_refs (
    core        TEXT NOT NULL,                 -- fineract
    ref         TEXT NOT NULL,                 -- what the core holds
    platform_id TEXT NOT NULL,
    kind        TEXT NOT NULL,                 -- loan|client
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (core, ref)
  );
  `,
  /* 11: customer match (issue 23b): the customers the connector resolved, by a keyed hash of the
     tax id (HMAC-SHA256 with customers.tinHashKey; never the tax id), the platform entity id ↔ CIF
     cross-reference with how each was resolved, and what each loan resolved (loans show, the
     report's new/matched customers per day). A customer is claimed here before the core write
     that creates it, so a retry, a restart or another loan never creates it twice. */ `
  CREATE TABLE customers (
    tin_hash        TEXT PRIMARY KEY,           -- HMAC of the normalised tax id
    cif             TEXT,                       -- the bank's customer number; null until a core that assigns it (Fineract) has
    origin          TEXT NOT NULL,              -- core: the core already had it | created: the connector creates it
    status          TEXT NOT NULL,              -- claimed: creator_loan_id's write creates it | written: it is in the core
    creator_loan_id TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
  );
  CREATE INDEX customers_cif ON customers (cif);
  CREATE INDEX customers_claimed ON customers (creator_loan_id) WHERE status = 'claimed';
  CREATE TABLE customer_xref (
    entity_id     TEXT PRIMARY KEY,             -- platform business / person id
    cif           TEXT,
    tin_hash      TEXT,
    matched_by    TEXT NOT NULL,                -- crossref | tin | created: how it was first resolved
    first_loan_id TEXT NOT NULL,
    last_loan_id  TEXT NOT NULL,
    resolved_at   INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
  );
  CREATE INDEX customer_xref_cif ON customer_xref (cif);
  CREATE INDEX customer_xref_tin ON customer_xref (tin_hash);
  CREATE TABLE loan_customers (
    loan_id     TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    cif         TEXT,
    tin_hash    TEXT,
    matched_by  TEXT NOT NULL,                  -- crossref | tin | created
    existing    INTEGER NOT NULL,               -- 1: already in the core (no customer record written)
    name_agrees INTEGER,                        -- 0: the core's name differs (a review item)
    resolved_at INTEGER NOT NULL,
    PRIMARY KEY (loan_id, entity_id)
  );
  CREATE INDEX loan_customers_resolved ON loan_customers (resolved_at);
  CREATE INDEX loan_customers_entity ON loan_customers (entity_id);
  CREATE TABLE customer_settings (
    name  TEXT PRIMARY KEY,                     -- tin_key_check: fingerprint of the HMAC key in use
    value TEXT NOT NULL
  );
  `,
  /* 12: file_batches.loan_count and record_count were written at the seal and never read: the
     batch's loans (file_batch_loans, kept after the seal) give the same counts, and control.csv
     holds what the files were written with. Dropped rather than kept in step with them. */ `
  ALTER TABLE file_batches DROP COLUMN loan_count;
  ALTER TABLE file_batches DROP COLUMN record_count;
  `,
  /* 13: the ops console (issue 27, src/store/console.ts). The exception queue pages by keyset over
     partial indexes of the exceptions only (quarantined loans, and written/acknowledged loans with
     review items: the generated column exception_reason), so its first page costs the same at
     100,000 loans as at 100 (the age index also carries loan number and borrower name, so a
     search reads the index only). state_entered_at (when the loan entered its state; kept by triggers,
     the pipeline does not know about it) gives the age; borrower_name (and borrower_key, its search form) the search by name.
     Requests (four eyes) with the loans each covers (frozen when made), an append-only audit log
     (triggers refuse UPDATE and DELETE), and the sign-off of each reconciliation run. The PostgreSQL body is the same schema in its dialect: BEFORE triggers in plpgsql, a STORED generated column, COALESCE for IFNULL. */ {
    sqlite: `
  ALTER TABLE loans ADD COLUMN state_entered_at INTEGER;
  ALTER TABLE loans ADD COLUMN borrower_name TEXT;
  ALTER TABLE loans ADD COLUMN borrower_key TEXT;             -- borrower_name without case or accents (src/lib/search-key.ts)
  UPDATE loans SET state_entered_at = COALESCE((SELECT MAX(at) FROM loan_events e WHERE e.loan_id = loans.id AND e.to_state = loans.state), updated_at);
  CREATE TRIGGER loans_state_entered_insert AFTER INSERT ON loans WHEN NEW.state_entered_at IS NULL
  BEGIN UPDATE loans SET state_entered_at = NEW.updated_at WHERE id = NEW.id; END;
  CREATE TRIGGER loans_state_entered_update AFTER UPDATE OF state ON loans WHEN NEW.state IS NOT OLD.state
  BEGIN UPDATE loans SET state_entered_at = NEW.updated_at WHERE id = NEW.id; END;
  ALTER TABLE loans ADD COLUMN exception_reason TEXT GENERATED ALWAYS AS (
    CASE WHEN state = 'quarantined' THEN COALESCE(quarantine_reason, 'validation')
         WHEN review_items > 0 AND state IN ('written', 'acknowledged') THEN 'review' END) VIRTUAL;
  CREATE INDEX loans_exc_age ON loans (state_entered_at, id, loan_number, borrower_key) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_reason ON loans (exception_reason, state_entered_at, id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_amount ON loans (IFNULL(cents_amount, -9007199254740992), id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_released ON loans (IFNULL(released_at_iso, ''), id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_id ON loans (id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_loan_number ON loans (loan_number);

${CONSOLE_REQUEST_TABLES}  CREATE TABLE console_audit (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,                 -- request|approve|reject|execute|fail|signoff|login_failed|login_throttled
    action     TEXT,
    request_id TEXT,
    loan_id    TEXT,
    reason     TEXT,
    detail     TEXT                           -- JSON
  );
  CREATE INDEX console_audit_loan ON console_audit (loan_id, seq) WHERE loan_id IS NOT NULL;
  CREATE INDEX console_audit_request ON console_audit (request_id, seq) WHERE request_id IS NOT NULL;
  CREATE TRIGGER console_audit_no_update BEFORE UPDATE ON console_audit BEGIN SELECT RAISE(ABORT, 'console_audit is append-only'); END;
  CREATE TRIGGER console_audit_no_delete BEFORE DELETE ON console_audit BEGIN SELECT RAISE(ABORT, 'console_audit is append-only'); END;
  CREATE TABLE report_signoffs (
    day         TEXT NOT NULL,                -- YYYY-MM-DD folder of reports.dir
    run         TEXT NOT NULL,                -- run-<HHMMSS>[-n] folder
    prepared_by TEXT,
    prepared_at INTEGER,
    reviewed_by TEXT,
    reviewed_at INTEGER,
    PRIMARY KEY (day, run)
  );
  `,
    postgres: `
  ALTER TABLE loans ADD COLUMN state_entered_at BIGINT;
  ALTER TABLE loans ADD COLUMN borrower_name TEXT;
  ALTER TABLE loans ADD COLUMN borrower_key TEXT;
  UPDATE loans SET state_entered_at = COALESCE((SELECT MAX(at) FROM loan_events e WHERE e.loan_id = loans.id AND e.to_state = loans.state), updated_at);
  CREATE FUNCTION loans_state_entered() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      IF NEW.state_entered_at IS NULL THEN NEW.state_entered_at := NEW.updated_at; END IF;
    ELSIF NEW.state IS DISTINCT FROM OLD.state THEN
      NEW.state_entered_at := NEW.updated_at;
    END IF;
    RETURN NEW;
  END
  $fn$;
  CREATE TRIGGER loans_state_entered BEFORE INSERT OR UPDATE OF state ON loans FOR EACH ROW EXECUTE FUNCTION loans_state_entered();
  ALTER TABLE loans ADD COLUMN exception_reason TEXT GENERATED ALWAYS AS (
    CASE WHEN state = 'quarantined' THEN COALESCE(quarantine_reason, 'validation')
         WHEN review_items > 0 AND state IN ('written', 'acknowledged') THEN 'review' END) STORED;
  CREATE INDEX loans_exc_age ON loans (state_entered_at, id, loan_number, borrower_key) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_reason ON loans (exception_reason, state_entered_at, id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_amount ON loans (COALESCE(cents_amount, -9007199254740992), id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_released ON loans (COALESCE(released_at_iso, ''), id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_exc_id ON loans (id) WHERE exception_reason IS NOT NULL;
  CREATE INDEX loans_loan_number ON loans (loan_number);

${pgMigrationSql(CONSOLE_REQUEST_TABLES)}  CREATE TABLE console_audit (
    seq        BIGSERIAL PRIMARY KEY,
    at         BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,                 -- request|approve|reject|execute|fail|signoff|login_failed|login_throttled
    action     TEXT,
    request_id TEXT,
    loan_id    TEXT,
    reason     TEXT,
    detail     TEXT                           -- JSON
  );
  CREATE INDEX console_audit_loan ON console_audit (loan_id, seq) WHERE loan_id IS NOT NULL;
  CREATE INDEX console_audit_request ON console_audit (request_id, seq) WHERE request_id IS NOT NULL;
  CREATE FUNCTION console_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    RAISE EXCEPTION 'console_audit is append-only';
  END
  $fn$;
  CREATE TRIGGER console_audit_no_update BEFORE UPDATE ON console_audit FOR EACH ROW EXECUTE FUNCTION console_audit_append_only();
  CREATE TRIGGER console_audit_no_delete BEFORE DELETE ON console_audit FOR EACH ROW EXECUTE FUNCTION console_audit_append_only();
  CREATE TABLE report_signoffs (
    day         TEXT NOT NULL,                -- YYYY-MM-DD folder of reports.dir
    run         TEXT NOT NULL,                -- run-<HHMMSS>[-n] folder
    prepared_by TEXT,
    prepared_at BIGINT,
    reviewed_by TEXT,
    reviewed_at BIGINT,
    PRIMARY KEY (day, run)
  );
    `,
  },
  /* 14: the fencing token of a lease (issue 26): the epoch grows whenever the lease changes hands,
     and the expiry moves with the heartbeat. A write transaction carrying a fence (sql.ts) checks
     holder, epoch and expiry in the same transaction. */ `
  ALTER TABLE leases ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE leases ADD COLUMN expires_at INTEGER;
  `,
  /* 15: PostgreSQL only: leadership with fencing (src/store/leadership/pg.ts) and the rate budget
     shared by replicas (src/store/rate-budget/pg.ts), on the database's clock. Its pause and
     strike tables are rate_shared_*: rate_pause/rate_strikes are the per-process ledger of
     migration 1 (src/store/rate-budget/sqlite.ts). */ {
    sqlite: '-- PostgreSQL only (leadership and the shared rate budget)',
    postgres: `
      -- One row per leadership (e.g. 'daemon'). holder NULL: released. epoch: the fencing token,
      -- incremented by every acquisition. Times are the database's clock only.
      CREATE TABLE leader_lease (
        name        text PRIMARY KEY,
        holder      text,
        epoch       bigint NOT NULL DEFAULT 0,
        acquired_at timestamptz,
        renewed_at  timestamptz,
        expires_at  timestamptz NOT NULL DEFAULT '-infinity'
      );

      -- GCRA: the theoretical arrival time of the next call per (key, class).
      CREATE TABLE rate_gcra (
        key   text NOT NULL,
        class text NOT NULL,
        tat   timestamptz NOT NULL,
        PRIMARY KEY (key, class)
      );

      -- A 429 pauses the class for every replica; a pause only ever grows.
      CREATE TABLE rate_shared_pause (
        key   text NOT NULL,
        class text NOT NULL,
        until timestamptz NOT NULL,
        PRIMARY KEY (key, class)
      );

      CREATE TABLE rate_shared_strikes (
        seq            bigserial PRIMARY KEY,
        key            text NOT NULL,
        at             timestamptz NOT NULL DEFAULT clock_timestamp(),
        class          text NOT NULL,
        path           text,
        retry_after_ms bigint,
        cleared_at     timestamptz,
        cleared_by     text
      );
      CREATE INDEX rate_shared_strikes_active ON rate_shared_strikes (key, at) WHERE cleared_at IS NULL;

      -- One call of the shared budget, decided in one statement by the caller
      -- (SELECT * FROM boarding_rate_take(...)): the GCRA row is locked first and only then the
      -- database clock read once, so the decision time is the time the grant is recorded.
      -- Order: traffic stop (strikes), pause, then the budget; a denied call consumes nothing, a
      -- granted one is never refunded. One active strike halves the pace (doubles the interval).
      CREATE FUNCTION boarding_rate_take(p_key text, p_class text, p_interval_us bigint, p_tau_us bigint,
                                         p_stop_at int, p_strike_window_us bigint)
        RETURNS TABLE (decision text, at timestamptz, wait_us bigint, strikes int)
        LANGUAGE plpgsql AS $fn$
      DECLARE
        v_tat   timestamptz;
        v_now   timestamptz;
        v_until timestamptz;
        v_int   interval;
        v_tau   interval := make_interval(secs => p_tau_us / 1e6);
        v_str   int;
      BEGIN
        INSERT INTO rate_gcra (key, class, tat) VALUES (p_key, p_class, '-infinity')
          ON CONFLICT (key, class) DO NOTHING;
        SELECT g.tat INTO v_tat FROM rate_gcra g WHERE g.key = p_key AND g.class = p_class FOR UPDATE;
        v_now := clock_timestamp();
        SELECT count(*) INTO v_str FROM rate_shared_strikes s
          WHERE s.key = p_key AND s.cleared_at IS NULL AND s.at >= v_now - make_interval(secs => p_strike_window_us / 1e6);
        IF v_str >= p_stop_at THEN
          RETURN QUERY SELECT 'stopped'::text, v_now, 0::bigint, v_str;
          RETURN;
        END IF;
        SELECT p.until INTO v_until FROM rate_shared_pause p WHERE p.key = p_key AND p.class = p_class;
        IF v_until IS NOT NULL AND v_until > v_now THEN
          RETURN QUERY SELECT 'paused'::text, v_now,
            ceil(extract(epoch FROM v_until - v_now) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        v_int := make_interval(secs => (CASE WHEN v_str > 0 THEN 2 ELSE 1 END) * p_interval_us / 1e6);
        v_tat := greatest(v_tat, v_now);
        IF v_tat - v_now > v_tau THEN
          RETURN QUERY SELECT 'wait'::text, v_now,
            ceil(extract(epoch FROM (v_tat - v_now) - v_tau) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        UPDATE rate_gcra g SET tat = v_tat + v_int WHERE g.key = p_key AND g.class = p_class;
        RETURN QUERY SELECT 'granted'::text, v_now, 0::bigint, v_str;
      END
      $fn$;
    `,
  },
  /* 16: PostgreSQL only: one strike ledger and the same halving as src/platform/rate-budget/budget.ts
     (issue 26 point 3). The shared ledger (rate_shared_strikes) is THE strike ledger on
     PostgreSQL: rows of the per-process tables of migration 1 (rate_strikes, rate_pause: e.g.
     copied by `state migrate`) are adopted into it once per key by src/store/rate-budget/pg.ts;
     legacy_seq keeps each adoption idempotent and leaves rate_strikes untouched (so
     `state migrate --verify-only` still compares equal). boarding_rate_take takes the pace after a
     strike as its own GCRA parameters (the halved limit the client computes), instead of doubling
     the interval, which allowed ⌈L/2⌉ where the client allows ⌊L/2⌋. */ {
    sqlite: '-- PostgreSQL only (the shared strike ledger and the pace after a strike)',
    postgres: `
      ALTER TABLE rate_shared_strikes ADD COLUMN legacy_seq bigint;
      CREATE UNIQUE INDEX rate_shared_strikes_legacy ON rate_shared_strikes (key, legacy_seq);

      DROP FUNCTION boarding_rate_take(text, text, bigint, bigint, int, bigint);
      -- As migration 15's, but with the GCRA parameters of the pace after a strike given
      -- (p_slow_*), so the limit in any window after a strike is exactly the one the caller chose.
      CREATE FUNCTION boarding_rate_take(p_key text, p_class text, p_interval_us bigint, p_tau_us bigint,
                                         p_slow_interval_us bigint, p_slow_tau_us bigint,
                                         p_stop_at int, p_strike_window_us bigint)
        RETURNS TABLE (decision text, at timestamptz, wait_us bigint, strikes int)
        LANGUAGE plpgsql AS $fn$
      DECLARE
        v_tat   timestamptz;
        v_now   timestamptz;
        v_until timestamptz;
        v_int   interval;
        v_tau   interval;
        v_str   int;
      BEGIN
        INSERT INTO rate_gcra (key, class, tat) VALUES (p_key, p_class, '-infinity')
          ON CONFLICT (key, class) DO NOTHING;
        SELECT g.tat INTO v_tat FROM rate_gcra g WHERE g.key = p_key AND g.class = p_class FOR UPDATE;
        v_now := clock_timestamp();
        SELECT count(*) INTO v_str FROM rate_shared_strikes s
          WHERE s.key = p_key AND s.cleared_at IS NULL AND s.at >= v_now - make_interval(secs => p_strike_window_us / 1e6);
        IF v_str >= p_stop_at THEN
          RETURN QUERY SELECT 'stopped'::text, v_now, 0::bigint, v_str;
          RETURN;
        END IF;
        SELECT p.until INTO v_until FROM rate_shared_pause p WHERE p.key = p_key AND p.class = p_class;
        IF v_until IS NOT NULL AND v_until > v_now THEN
          RETURN QUERY SELECT 'paused'::text, v_now,
            ceil(extract(epoch FROM v_until - v_now) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        IF v_str > 0 THEN
          v_int := make_interval(secs => p_slow_interval_us / 1e6);
          v_tau := make_interval(secs => p_slow_tau_us / 1e6);
        ELSE
          v_int := make_interval(secs => p_interval_us / 1e6);
          v_tau := make_interval(secs => p_tau_us / 1e6);
        END IF;
        v_tat := greatest(v_tat, v_now);
        IF v_tat - v_now > v_tau THEN
          RETURN QUERY SELECT 'wait'::text, v_now,
            ceil(extract(epoch FROM (v_tat - v_now) - v_tau) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        UPDATE rate_gcra g SET tat = v_tat + v_int WHERE g.key = p_key AND g.class = p_class;
        RETURN QUERY SELECT 'granted'::text, v_now, 0::bigint, v_str;
      END
      $fn$;
    `,
  },
  /* 17: flat cost per loan at scale (issue 37): filling a new customer's CIF into the loans that
     named it (customers.setCif / markWritten, three times per loan) looked loan_customers up by
     tin_hash with no index, a scan of every loan's customer rows per board: cost grew with the
     number of loans boarded so far. */ `
  CREATE INDEX loan_customers_tin ON loan_customers (tin_hash);
  `,
  /* 18: PostgreSQL only: the shared rate budget is a sliding-window log (issue 37 point 4). GCRA
     with a burst of 2 sustained at most (L − 1) per window, and a caller that woke later than one
     interval lost its slot for good: two replicas used 0.74 (reads) and 0.93 (writes) of the
     allowance. The log grants while fewer than L grants lie in the last window, so every slot is
     used, a late caller only takes its slot late, and any window of that length still holds at
     most L grants, whatever the replicas' clocks. Grants are also spaced by at least half the
     mean interval (W / 2L): a freed window is not spent in one burst whose arrivals, jittered on
     the way, could crowd into one window at the platform. The GCRA function is dropped, so a replica of
     an older version still running fails closed (its calls are not sent) instead of spending from
     a budget the others no longer see. */ {
    sqlite: '-- PostgreSQL only (the shared rate budget as a sliding-window log)',
    postgres: `
      DROP FUNCTION boarding_rate_take(text, text, bigint, bigint, bigint, bigint, int, bigint);
      DROP TABLE rate_gcra;

      -- The grants of the last window per (key, class), on the database clock.
      CREATE TABLE rate_shared_grants (
        key   text NOT NULL,
        class text NOT NULL,
        at    timestamptz NOT NULL
      );
      CREATE INDEX rate_shared_grants_at ON rate_shared_grants (key, class, at);
      -- One row per (key, class): the lock every decision takes, and how many grants the log holds.
      CREATE TABLE rate_shared_window (
        key   text NOT NULL,
        class text NOT NULL,
        n       int NOT NULL DEFAULT 0,
        last_at timestamptz,
        PRIMARY KEY (key, class)
      );

      CREATE FUNCTION boarding_rate_take_window(p_key text, p_class text, p_limit int, p_slow_limit int,
                                                p_window_us bigint, p_stop_at int, p_strike_window_us bigint)
        RETURNS TABLE (decision text, at timestamptz, wait_us bigint, strikes int)
        LANGUAGE plpgsql AS $fn$
      DECLARE
        v_now   timestamptz;
        v_until timestamptz;
        v_win   interval;
        v_edge  timestamptz;
        v_str   int;
        v_lim   int;
        v_n     int;
        v_gone  int;
        v_last  timestamptz;
        v_gap   interval;
      BEGIN
        INSERT INTO rate_shared_window (key, class) VALUES (p_key, p_class) ON CONFLICT (key, class) DO NOTHING;
        SELECT w.n, w.last_at INTO v_n, v_last FROM rate_shared_window w WHERE w.key = p_key AND w.class = p_class FOR UPDATE;
        v_now := clock_timestamp();
        SELECT count(*) INTO v_str FROM rate_shared_strikes s
          WHERE s.key = p_key AND s.cleared_at IS NULL AND s.at >= v_now - make_interval(secs => p_strike_window_us / 1e6);
        IF v_str >= p_stop_at THEN
          RETURN QUERY SELECT 'stopped'::text, v_now, 0::bigint, v_str;
          RETURN;
        END IF;
        SELECT p.until INTO v_until FROM rate_shared_pause p WHERE p.key = p_key AND p.class = p_class;
        IF v_until IS NOT NULL AND v_until > v_now THEN
          RETURN QUERY SELECT 'paused'::text, v_now,
            ceil(extract(epoch FROM v_until - v_now) * 1e6)::bigint, v_str;
          RETURN;
        END IF;
        v_lim := CASE WHEN v_str > 0 THEN p_slow_limit ELSE p_limit END;
        v_win := make_interval(secs => p_window_us / 1e6);
        -- A grant at or before now − W has left the window [now − W, now).
        DELETE FROM rate_shared_grants g WHERE g.key = p_key AND g.class = p_class AND g.at <= v_now - v_win;
        GET DIAGNOSTICS v_gone = ROW_COUNT;
        v_n := greatest(0, v_n - v_gone);
        IF v_n >= v_lim THEN
          -- Wait until enough grants have left for one more: the (n − L + 1)-th oldest.
          SELECT g.at INTO v_edge FROM rate_shared_grants g WHERE g.key = p_key AND g.class = p_class
            ORDER BY g.at OFFSET (v_n - v_lim) LIMIT 1;
          UPDATE rate_shared_window w SET n = v_n WHERE w.key = p_key AND w.class = p_class;
          RETURN QUERY SELECT 'wait'::text, v_now,
            greatest(1, ceil(extract(epoch FROM v_edge + v_win - v_now) * 1e6))::bigint, v_str;
          RETURN;
        END IF;
        -- At least W / 2L after the previous grant (never a whole window in one burst).
        v_gap := make_interval(secs => floor(p_window_us / (2.0 * v_lim)) / 1e6);
        IF v_last IS NOT NULL AND v_now < v_last + v_gap THEN
          UPDATE rate_shared_window w SET n = v_n WHERE w.key = p_key AND w.class = p_class;
          RETURN QUERY SELECT 'wait'::text, v_now,
            greatest(1, ceil(extract(epoch FROM v_last + v_gap - v_now) * 1e6))::bigint, v_str;
          RETURN;
        END IF;
        INSERT INTO rate_shared_grants (key, class, at) VALUES (p_key, p_class, v_now);
        UPDATE rate_shared_window w SET n = v_n + 1, last_at = v_now WHERE w.key = p_key AND w.class = p_class;
        RETURN QUERY SELECT 'granted'::text, v_now, 0::bigint, v_str;
      END
      $fn$;
    `,
  },
  /* 19: the console's day of work (issue 36). A sign-off keeps the signer's comment and, from the
     preparer, a disposition per exception (JSON, the run's signoff.json is written from it). A
     console user's password hash re-hashed at OWASP's scrypt parameters at their next login, kept
     here because the config file is the bank's (`replaces`: a fingerprint of the configured hash it
     upgrades; a new hash in the config wins). Unlocks of a login lock (an approver or `console
     unlock`) are audit lines, found by the user's name. */ `
  ALTER TABLE report_signoffs ADD COLUMN prepared_note TEXT;
  ALTER TABLE report_signoffs ADD COLUMN reviewed_note TEXT;
  ALTER TABLE report_signoffs ADD COLUMN dispositions TEXT;
  CREATE TABLE console_password_hashes (
    name       TEXT PRIMARY KEY,
    replaces   TEXT NOT NULL,
    hash       TEXT NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX console_audit_unlock ON console_audit (reason, at) WHERE kind = 'unlock';
  `,
  /* 20: documents to the bank's imaging system (issue 45, src/imaging/). A batch is one folder the
     importer polls (per loan, or per cut-off like the file core's batches); a document is exported
     once per loan (UNIQUE (loan_id, document_id, reexport): 0 the first export, n the n-th audited
     re-export), whatever the crashes and replicas. The index record is stored encrypted with the
     batch's key (it may carry a tax id where the bank's layout puts one) and cleared at the seal.
     imaging_loans says a loan's release went through the export (the ack waits for it). */ `
  CREATE TABLE imaging_batches (
    id          TEXT PRIMARY KEY,               -- <bank day>-<nnn>
    status      TEXT NOT NULL,                  -- open|sealing|publishing|sealed
    opened_at   INTEGER NOT NULL,
    cutoff_at   INTEGER,                        -- null: a loan's own batch
    sealing_at  INTEGER,
    sealed_at   INTEGER,
    seal_reason TEXT,                           -- loan|cutoff|size|layout changed|ops: <reason>
    sealed_by   TEXT,
    layout      TEXT NOT NULL                   -- the index layout's text the batch is written in
  );
  CREATE UNIQUE INDEX imaging_batches_one_open ON imaging_batches (status) WHERE status = 'open';
  CREATE INDEX imaging_batches_unsealed ON imaging_batches (opened_at) WHERE status <> 'sealed';
  CREATE TABLE imaging_documents (
    batch_id        TEXT NOT NULL REFERENCES imaging_batches (id),
    loan_id         TEXT NOT NULL,
    document_id     TEXT NOT NULL,
    seq             INTEGER NOT NULL,           -- order in the batch's index
    file_name       TEXT NOT NULL,              -- Windows-safe, unique by document id
    staged_path     TEXT NOT NULL,
    sha256          TEXT NOT NULL,
    bytes           INTEGER NOT NULL,
    document_type   TEXT NOT NULL,
    fell_back       INTEGER NOT NULL,           -- 1: the layout's default document type
    record          TEXT NOT NULL,              -- the field values (encrypted); '' once sealed
    reexport        INTEGER NOT NULL,
    reexport_by     TEXT,
    reexport_reason TEXT,
    exported_at     INTEGER NOT NULL,
    PRIMARY KEY (batch_id, document_id)
  );
  CREATE UNIQUE INDEX imaging_documents_once ON imaging_documents (loan_id, document_id, reexport);
  CREATE TABLE imaging_loans (
    loan_id        TEXT NOT NULL,
    release_marker TEXT NOT NULL,
    documents      INTEGER NOT NULL,            -- documents the loan had at this release
    exported_at    INTEGER NOT NULL,
    PRIMARY KEY (loan_id, release_marker)
  );
  `,
  /* 21: a bank number in two statements (issue 44 item 5, src/store/identity/numbers.ts): the pool's
     allocated count follows bank_numbers by trigger instead of a third statement per number. The count
     is rebuilt from the rows once, so a state from any earlier version starts exact. (A copy to
     PostgreSQL skips the counts table: the trigger there rebuilds it from the copied numbers.) */ {
    sqlite: `
  DELETE FROM bank_number_counts;
  INSERT INTO bank_number_counts (pool, allocated) SELECT pool, COUNT(*) FROM bank_numbers GROUP BY pool;
  CREATE TRIGGER bank_numbers_count AFTER INSERT ON bank_numbers
  BEGIN
    INSERT INTO bank_number_counts (pool, allocated) VALUES (NEW.pool, 1)
      ON CONFLICT (pool) DO UPDATE SET allocated = allocated + 1;
  END;
  `,
    postgres: `
  DELETE FROM bank_number_counts;
  INSERT INTO bank_number_counts (pool, allocated) SELECT pool, COUNT(*) FROM bank_numbers GROUP BY pool;
  CREATE FUNCTION bank_numbers_count() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    INSERT INTO bank_number_counts (pool, allocated) VALUES (NEW.pool, 1)
      ON CONFLICT (pool) DO UPDATE SET allocated = bank_number_counts.allocated + 1;
    RETURN NULL;
  END
  $fn$;
  CREATE TRIGGER bank_numbers_count AFTER INSERT ON bank_numbers FOR EACH ROW EXECUTE FUNCTION bank_numbers_count();
  `,
  },
  /* 22: the in-process rate budget keeps its spend log in memory (issue 44 item 5,
     src/platform/rate-budget/in-process.ts): what survives a restart, and what another process on
     the same state file sees, is one row per process and bucket written ahead of the tokens it
     covers — up to `spent` tokens, all counted as spent at `until` — at most once a second and at
     shutdown, instead of a row per request. The per-request log of an earlier version becomes one
     such row per bucket (its count at its last token: a restart right after the upgrade still does
     not burst), and is emptied. (PostgreSQL keeps its shared ledger; the table exists there too,
     unused, as every table of the one history does.) */ `
  CREATE TABLE rate_spend_windows (
    owner  TEXT NOT NULL,                       -- the process (pid:random), new at each start
    bucket TEXT NOT NULL,                       -- read|write
    spent  INTEGER NOT NULL,                    -- tokens it may have spent in the window…
    until  INTEGER NOT NULL,                    -- …all counted as spent at this instant (epoch ms)
    PRIMARY KEY (owner, bucket)
  );
  INSERT INTO rate_spend_windows (owner, bucket, spent, until)
    SELECT 'before-upgrade', bucket, COUNT(*), MAX(at) FROM rate_spend GROUP BY bucket;
  DELETE FROM rate_spend;
  `,
  /* 23: the shared rate ledger counts a call until its answer is in, not only from its grant
     (src/store/rate-budget/pg.ts). The platform counts a call when it ARRIVES, some time after the
     ledger granted it (the event loop, the pool, the network, a paused process); a window that
     holds L grants could hold L + k arrivals. A grant now leaves the window a window after its
     `leaves` instant: while the call is in flight that is the grant plus the longest a call may
     take (the client's timeouts), and once the process books the answer it becomes the database's
     clock at that moment, which is after the arrival. So any window at the platform holds at most
     L arrivals, whatever the delays. Grants already in the log count as answered at their grant.
     The function's signature changes (the flight bound, the re-ask, the grant's id), so a replica
     of an older version fails closed: its calls are not sent until it is upgraded. */ {
    sqlite: '-- PostgreSQL only (the shared rate ledger counts a call until its answer)',
    postgres: `
      DROP FUNCTION boarding_rate_take_window(text, text, int, int, bigint, int, bigint);
      DROP INDEX rate_shared_grants_at;
      ALTER TABLE rate_shared_grants ADD COLUMN id bigserial PRIMARY KEY;
      -- When the grant leaves the window (a window after this): the answer's instant, or the flight bound.
      ALTER TABLE rate_shared_grants ADD COLUMN leaves timestamptz;
      ALTER TABLE rate_shared_grants ADD COLUMN answered boolean NOT NULL DEFAULT false;
      UPDATE rate_shared_grants SET leaves = at, answered = true;
      ALTER TABLE rate_shared_grants ALTER COLUMN leaves SET NOT NULL;
      CREATE INDEX rate_shared_grants_leaves ON rate_shared_grants (key, class, leaves);

      CREATE FUNCTION boarding_rate_take_window(p_key text, p_class text, p_limit int, p_slow_limit int,
                                                p_window_us bigint, p_stop_at int, p_strike_window_us bigint,
                                                p_flight_us bigint, p_reask_us bigint)
        RETURNS TABLE (decision text, at timestamptz, wait_us bigint, strikes int, grant_id bigint)
        LANGUAGE plpgsql AS $fn$
      DECLARE
        v_now   timestamptz;
        v_until timestamptz;
        v_win   interval;
        v_edge  timestamptz;
        v_done  boolean;
        v_str   int;
        v_lim   int;
        v_n     int;
        v_gone  int;
        v_last  timestamptz;
        v_gap   interval;
        v_wait  bigint;
        v_id    bigint;
      BEGIN
        INSERT INTO rate_shared_window (key, class) VALUES (p_key, p_class) ON CONFLICT (key, class) DO NOTHING;
        SELECT w.n, w.last_at INTO v_n, v_last FROM rate_shared_window w WHERE w.key = p_key AND w.class = p_class FOR UPDATE;
        v_now := clock_timestamp();
        SELECT count(*) INTO v_str FROM rate_shared_strikes s
          WHERE s.key = p_key AND s.cleared_at IS NULL AND s.at >= v_now - make_interval(secs => p_strike_window_us / 1e6);
        IF v_str >= p_stop_at THEN
          RETURN QUERY SELECT 'stopped'::text, v_now, 0::bigint, v_str, NULL::bigint;
          RETURN;
        END IF;
        SELECT p.until INTO v_until FROM rate_shared_pause p WHERE p.key = p_key AND p.class = p_class;
        IF v_until IS NOT NULL AND v_until > v_now THEN
          RETURN QUERY SELECT 'paused'::text, v_now,
            ceil(extract(epoch FROM v_until - v_now) * 1e6)::bigint, v_str, NULL::bigint;
          RETURN;
        END IF;
        v_lim := CASE WHEN v_str > 0 THEN p_slow_limit ELSE p_limit END;
        v_win := make_interval(secs => p_window_us / 1e6);
        -- A grant whose call was answered at or before now − W has left the window [now − W, now).
        DELETE FROM rate_shared_grants g WHERE g.key = p_key AND g.class = p_class AND g.leaves <= v_now - v_win;
        GET DIAGNOSTICS v_gone = ROW_COUNT;
        v_n := greatest(0, v_n - v_gone);
        IF v_n >= v_lim THEN
          -- Wait until enough grants have left for one more: the (n − L + 1)-th to leave. A call
          -- still in flight leaves when its answer is booked, unknown yet: ask again after p_reask_us.
          SELECT g.leaves, g.answered INTO v_edge, v_done FROM rate_shared_grants g
            WHERE g.key = p_key AND g.class = p_class ORDER BY g.leaves OFFSET (v_n - v_lim) LIMIT 1;
          UPDATE rate_shared_window w SET n = v_n WHERE w.key = p_key AND w.class = p_class;
          v_wait := greatest(1, ceil(extract(epoch FROM v_edge + v_win - v_now) * 1e6))::bigint;
          IF NOT v_done THEN
            v_wait := least(v_wait, p_reask_us);
          END IF;
          RETURN QUERY SELECT 'wait'::text, v_now, v_wait, v_str, NULL::bigint;
          RETURN;
        END IF;
        -- At least W / 2L after the previous grant (never a whole window in one burst).
        v_gap := make_interval(secs => floor(p_window_us / (2.0 * v_lim)) / 1e6);
        IF v_last IS NOT NULL AND v_now < v_last + v_gap THEN
          UPDATE rate_shared_window w SET n = v_n WHERE w.key = p_key AND w.class = p_class;
          RETURN QUERY SELECT 'wait'::text, v_now,
            greatest(1, ceil(extract(epoch FROM v_last + v_gap - v_now) * 1e6))::bigint, v_str, NULL::bigint;
          RETURN;
        END IF;
        -- A caller that books no answers (flight 0) has its grants counted as answered at once.
        INSERT INTO rate_shared_grants (key, class, at, leaves, answered)
          VALUES (p_key, p_class, v_now, v_now + make_interval(secs => p_flight_us / 1e6), p_flight_us = 0)
          RETURNING id INTO v_id;
        UPDATE rate_shared_window w SET n = v_n + 1, last_at = v_now WHERE w.key = p_key AND w.class = p_class;
        RETURN QUERY SELECT 'granted'::text, v_now, 0::bigint, v_str, v_id;
      END
      $fn$;
    `,
  },
];

/** How each engine reads a migration: a portable text (SQLite's dialect) or one text per engine. */
const MIGRATION_TEXT: Record<'sqlite' | 'postgres', (m: Migration) => string> = {
  sqlite: (m) => (typeof m === 'string' ? m : m.sqlite),
  postgres: (m) => (typeof m === 'string' ? pgMigrationSql(m) : m.postgres),
};

/** The text of a migration for an engine. */
export function migrationSql(m: Migration, engine: 'sqlite' | 'postgres'): string {
  return MIGRATION_TEXT[engine](m);
}

/**
 * A portable migration (written for SQLite) for PostgreSQL: epoch-ms INTEGER columns are BIGINT
 * there (an INTEGER is 32-bit), AUTOINCREMENT keys are BIGSERIAL, and the tables whose SQLite rowid
 * the repositories read (arrival order) get an explicit rowid column.
 */
export function pgMigrationSql(text: string): string {
  return text
    .replace(/INTEGER PRIMARY KEY AUTOINCREMENT/g, 'BIGSERIAL PRIMARY KEY')
    .replace(/\bINTEGER\b/g, 'BIGINT')
    .replace(
      /CREATE TABLE (webhook_inbox|loan_customers|file_batch_loans) \(/g,
      'CREATE TABLE $1 (\n    rowid BIGSERIAL UNIQUE,',
    );
}
