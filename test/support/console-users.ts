import { hashPassword, type ScryptParams } from '../../src/console/auth.js';

/**
 * scrypt parameters for tests that log in but are not about hashing: N=2^10 costs about a
 * millisecond where OWASP's N=2^17 costs a second (console passwd's default; test/unit/console/auth.test.ts
 * covers it and the re-hash path). Configs built with these hashes set console.upgradeHashes: false,
 * or the first login of each user would pay the re-hash.
 */
export const TEST_SCRYPT: ScryptParams = { ln: 10, r: 8, p: 1 };

export const testHash = (password: string): Promise<string> => hashPassword(password, TEST_SCRYPT);
