import type { ExceptionReason } from './types.js';

/** Short labels for tables and the chart legend. */
export const REASON_LABELS: Record<ExceptionReason, string> = {
  acknowledged_missing_in_core: 'Acknowledged, missing in core',
  in_core_not_acknowledged: 'In core, not acknowledged',
  quarantined: 'Quarantined',
  funded_not_released: 'Funded, not released',
  field_mismatch: 'Field differs (platform vs core)',
  acknowledged_unknown_to_connector: 'Boarded, unknown to connector',
  in_core_unknown_to_connector: 'In core, unknown to connector',
  state_mismatch: 'Boarded, connector state differs',
  stuck_pending: 'Pending > 1 business day',
  written_missing_in_core: 'Written by connector, missing in core',
  boarded_with_review_items: 'Boarded with review items',
};

/** What each reason means and what ops do about it (report.json carries these; docs repeat them). */
export const REASON_ACTIONS: Record<ExceptionReason, string> = {
  acknowledged_missing_in_core:
    "The platform shows the loan boarded but the core has no record: request a retry on the loan's " +
    'console page (/console/loans/ID; `loans retry ID` on the ' +
    'host) or board it manually, and find out who acknowledged it.',
  in_core_not_acknowledged:
    'The core holds the loan but the platform does not show it boarded: usually resolved by the next ' +
    "cycle; if it persists, a retry on the loan's console page (/console/loans/ID; " +
    '`loans retry ID` on the host) acknowledges without writing again.',
  quarantined:
    'The connector stopped on this loan: fix the cause named in the detail, then request a retry (or ' +
    "a skip) on the loan's console page (/console/loans/ID; on " +
    'the host `loans retry ID` or `loans skip ID --reason …`).',
  funded_not_released:
    'Funded on the platform but no banker released it to the core: ask the lending team to release it.',
  field_mismatch:
    'The core record differs from the platform: correct the core (or the platform) and note it in the sign-off.',
  acknowledged_unknown_to_connector:
    'Boarded on the platform by something other than this connector ' +
    '(or its state was lost): confirm the core has it exactly once.',
  in_core_unknown_to_connector:
    'The core holds a loan with a platform external id that no source explains: investigate before anything else.',
  state_mismatch:
    'The platform shows the loan boarded while the connector has not recorded its acknowledgement: ' +
    "open the loan's console page (/console/loans/ID) and request " +
    'a retry (on the host: `loans show ID`, then `loans retry ID`).',
  stuck_pending:
    "Released but not boarded for more than a business day: the loan's console page (/console/loans/ID; " +
    '`loans show ID` on the host) has the last error, the Status page the platform rate budget.',
  written_missing_in_core:
    'The connector recorded a core write but the core has no record (restored backup, manual ' +
    "delete?): a retry on the loan's console page (/console/loans/ID; `loans " +
    'retry ID` on the host) writes it again, idempotently by external id.',
  boarded_with_review_items:
    'Boarded, but a mapping convention approximated (a schedule rounded, an unknown value defaulted, ' +
    'an optional field left out): each exception lists its items (code, ' +
    'field, message, mapping file:line); check the core record and sign off.',
};
