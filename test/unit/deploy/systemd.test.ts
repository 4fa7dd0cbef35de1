import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';

/**
 * deploy/systemd/boarding-connector.service: the unit docs/deploy.md installs. Parsed as systemd
 * reads it (sections, repeated keys), checked against the daemon's stop semantics and for the
 * hardening directives, and scored by `systemd-analyze security --offline` where systemd is there.
 */
const UNIT = 'deploy/systemd/boarding-connector.service';

function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | null = null;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    const section = /^\[(\w+)\]$/.exec(line);
    if (section) {
      current = new Map();
      sections.set(section[1]!, current);
      return;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (!kv || !current) throw new Error(`${UNIT}:${i + 1}: not a directive: ${raw}`);
    current.set(kv[1]!, [...(current.get(kv[1]!) ?? []), kv[2]!]);
  });
  return sections;
}

const unit = parseUnit(readFileSync(UNIT, 'utf8'));
const service = unit.get('Service')!;
const one = (key: string): string | undefined => service.get(key)?.at(-1);

describe('the systemd unit', () => {
  it('has the three sections and runs the daemon with its config, as a non-root user', () => {
    expect([...unit.keys()]).toEqual(['Unit', 'Service', 'Install']);
    expect(one('ExecStart')).toMatch(
      /^\/usr\/bin\/node dist\/main\.js run --config \/etc\/boarding-connector\/config\.yaml$/,
    );
    expect(one('User')).toBe('boarding');
    expect(unit.get('Install')!.get('WantedBy')).toEqual(['multi-user.target']);
  });

  it('stops as the daemon drains: SIGTERM, and more time than the default shutdownTimeoutMs + 10 s', () => {
    const defaults = loadConfig({
      env: {},
      fileText:
        'platform: { baseUrl: "https://lender.example.com/api", apiKey: pk_test_x, environment: staging }\n',
    });
    expect(one('KillSignal')).toBe('SIGTERM');
    expect(Number(one('TimeoutStopSec'))).toBeGreaterThanOrEqual(
      defaults.boarding.shutdownTimeoutMs / 1000 + 10,
    );
    expect(one('Restart')).toBe('on-failure');
  });

  it('keeps secrets in a separate file: no Environment= line carries one', () => {
    expect(one('EnvironmentFile')).toBe('/etc/boarding-connector/secrets.env');
    for (const e of service.get('Environment') ?? []) expect(e).not.toMatch(/KEY|SECRET|PASSWORD/);
  });

  it('is hardened: no new privileges, no capabilities, read-only system, private state, syscall filter', () => {
    for (const [k, v] of Object.entries({
      NoNewPrivileges: 'true',
      CapabilityBoundingSet: '',
      ProtectSystem: 'strict',
      ProtectHome: 'true',
      PrivateTmp: 'true',
      PrivateDevices: 'true',
      RestrictSUIDSGID: 'true',
      StateDirectory: 'boarding-connector',
      StateDirectoryMode: '0700',
      UMask: '0077',
      SystemCallArchitectures: 'native',
    }))
      expect(one(k), k).toBe(v);
    expect(service.get('SystemCallFilter')).toContain('@system-service');
    // V8's JIT needs writable executable memory: this one would kill node at start.
    expect(one('MemoryDenyWriteExecute')).toBeUndefined();
  });

  const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  const offline = analyze.status === 0 && Number(/systemd (\d+)/.exec(analyze.stdout)?.[1] ?? 0) >= 252;
  it.skipIf(!offline)('systemd-analyze security rates it 2.0 or better (OK)', () => {
    const r = spawnSync('systemd-analyze', ['security', '--offline=true', `./${UNIT}`], { encoding: 'utf8' });
    const m = /Overall exposure level for \S+: ([\d.]+)/.exec(r.stdout);
    expect(m, r.stdout + r.stderr).not.toBeNull();
    expect(Number(m![1])).toBeLessThanOrEqual(2.0);
  });
});
