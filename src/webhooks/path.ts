/** Where the webhook receiver listens (its own module: naming it must not load the HTTP stack). */
export const WEBHOOK_PATH = '/webhooks/platform';
