'use strict';
// A throwaway Engage server (`engage serve --ephemeral`, the test clock and faults
// on, on a free port of 127.0.0.1) and the test kit's routes (`/_engage/...`) for
// one workspace per test. No dependencies: Node's child_process and global fetch.
//
//   const { startEngage } = require('engage-server');
//   const server = await startEngage();
//   const engage = await server.newWorkspace();   // engage.url, engage.apiKey
//   ...
//   await engage.remove();
//   await server.stop();
//
// Every admin call sends `Authorization: Bearer <admin token>` and resolves to the
// response's JSON; a status of 400 or more rejects with an EngageError carrying
// the status and the body the server sent.

const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

// How many free ports are tried when another process takes the one picked first.
const PORT_ATTEMPTS = 5;

/** An admin call that failed: `status` (null when the server did not answer) and `body`. */
class EngageError extends Error {
  constructor(method, pathname, status, body) {
    const what = status === null ? 'did not answer' : `answered ${status}`;
    super(`engage: ${method} ${pathname} ${what}: ${body}`);
    this.name = 'EngageError';
    this.method = method;
    this.path = pathname;
    this.status = status;
    this.body = body;
  }
}

/** The path of the bundled `engage` binary, made executable if the installer dropped the bit. */
function binaryPath() {
  const file = path.join(__dirname, 'bin', 'engage-linux-x64');
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    try {
      fs.chmodSync(file, 0o755);
    } catch {
      // a read-only install: spawning it then says why
    }
  }
  return file;
}

function text(value) {
  return value instanceof Date ? value.toISOString() : value;
}

async function call(baseUrl, token, method, pathname, body) {
  // One connection per call: a kept-alive one would hold up the server's stop by
  // the seconds it grants open connections to finish.
  const headers = { authorization: `Bearer ${token}`, connection: 'close' };
  let payload;
  if (body !== undefined && body !== null) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(baseUrl + pathname, { method, headers, body: payload });
  } catch (error) {
    throw new EngageError(method, pathname, null, String(error.cause?.message ?? error.message));
  }
  const raw = await response.text();
  if (!response.ok) throw new EngageError(method, pathname, response.status, raw);
  if (!raw) return null;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts `engage serve --ephemeral` and resolves once `/readyz` answers.
 * options.binary: another `engage`; options.args: more `engage serve` arguments
 * (`['--strict']`); options.readyTimeoutMs (default 30000). The child gets none
 * of this process's `ENGAGE_*` variables; RUST_LOG is `warn` unless set. A server
 * never stopped is killed when this process exits.
 */
async function startEngage(options = {}) {
  const binary = options.binary ?? binaryPath();
  const adminToken = crypto.randomBytes(32).toString('base64url');
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('ENGAGE_')) env[key] = value;
  }
  env.ENGAGE_ADMIN_TOKEN = adminToken;
  env.RUST_LOG ??= 'warn';
  const timeoutMs = options.readyTimeoutMs ?? 30000;

  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const child = spawn(
      binary,
      ['serve', '--ephemeral', '--test-clock', '--faults', '--listen', `127.0.0.1:${port}`, ...(options.args ?? [])],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    const keep = (chunk) => {
      log = (log + chunk).slice(-16384);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let exited = null;
    const done = new Promise((resolve) => {
      child.on('exit', (code, signal) => resolve((exited = { code, signal })));
      child.on('error', (error) => resolve((exited = { error })));
    });
    const kill = () => child.kill('SIGKILL');
    process.on('exit', kill);
    // Neither the process nor its pipes keep this one alive: a forgotten stop()
    // does not hang the test run (the 'exit' handler above ends the server).
    child.unref();
    child.stdout.unref();
    child.stderr.unref();

    const deadline = Date.now() + timeoutMs;
    let ready = false;
    while (!exited && !ready) {
      try {
        const response = await fetch(`${url}/readyz`, {
          headers: { connection: 'close' },
          signal: AbortSignal.timeout(1000),
        });
        await response.arrayBuffer();
        ready = response.status === 200;
      } catch {
        // not listening yet
      }
      if (!ready && !exited) {
        if (Date.now() > deadline) {
          kill();
          await done;
          process.off('exit', kill);
          throw new Error(`engage serve was not ready in ${timeoutMs} ms:\n${log}`);
        }
        await sleep(50);
      }
    }
    if (ready && !exited) return new Server(child, done, kill, url, adminToken, () => log);
    process.off('exit', kill);
    if (/Address already in use/.test(log) && attempt < PORT_ATTEMPTS) continue;
    const why = exited.error ? exited.error.message : `exit ${exited.code ?? exited.signal}`;
    throw new Error(`engage serve did not start (${why}):\n${log}`);
  }
}

/** A running server: `url`, `adminToken`, `admin()`, `newWorkspace()`, `stop()`. */
class Server {
  constructor(child, done, kill, url, adminToken, log) {
    this.url = url;
    this.adminToken = adminToken;
    this.process = child;
    this._done = done;
    this._kill = kill;
    this._log = log;
  }

  /** The server's latest output (at most 16 KiB). */
  log() {
    return this._log();
  }

  /** Any operator route: `admin('GET', '/_engage/faults')`. Resolves to the JSON. */
  admin(method, pathname, body) {
    return call(this.url, this.adminToken, method, pathname, body);
  }

  /** A new workspace with an all-permissions key (`POST /_engage/workspaces`). */
  async newWorkspace(name, apiKey) {
    const body = { name: name ?? `test-${crypto.randomBytes(6).toString('hex')}` };
    if (apiKey !== undefined) body.api_key = apiKey;
    const made = await this.admin('POST', '/_engage/workspaces', body);
    return new Workspace(this, made.name, made.api_key);
  }

  /** Stops the server (SIGTERM, then SIGKILL after 10 s); its database goes with it. */
  async stop() {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill('SIGTERM');
      const timer = setTimeout(this._kill, 10000);
      await this._done;
      clearTimeout(timer);
    }
    process.off('exit', this._kill);
  }
}

/** One workspace on a server: `url` and `apiKey` for the client under test, and the test kit's routes. */
class Workspace {
  constructor(server, workspace, apiKey) {
    this.server = server;
    this.url = server.url;
    this.apiKey = apiKey;
    this.workspace = workspace;
    this._snapshots = new Set();
  }

  _query(pathname) {
    return `${pathname}?workspace=${encodeURIComponent(this.workspace)}`;
  }

  _filter(filter) {
    const body = { workspace: this.workspace };
    for (const [key, value] of Object.entries(filter ?? {})) body[key] = text(value);
    return body;
  }

  /** Any operator route, as `server.admin`. */
  admin(method, pathname, body) {
    return this.server.admin(method, pathname, body);
  }

  /** Journaled requests matching `{method, path, status, body, since}`, newest first. */
  async requests(filter) {
    return (await this.admin('POST', '/_engage/requests/find', this._filter(filter))).requests;
  }

  /** How many journaled requests match. */
  async count(filter) {
    return (await this.admin('POST', '/_engage/requests/count', this._filter(filter))).count;
  }

  /** Makes matching requests fail or wait; resolves to the fault's id. */
  async fault(spec) {
    return (await this.admin('POST', '/_engage/faults', { workspace: this.workspace, ...spec })).id;
  }

  /** Moves this workspace's clock forward; resolves to the new time. */
  async advanceClock(secs) {
    return (await this.admin('POST', this._query('/_engage/clock'), { advance_secs: secs })).now;
  }

  /** Sets this workspace's clock (RFC 3339 text or a Date); resolves to it. */
  async setClock(now) {
    return (await this.admin('POST', this._query('/_engage/clock'), { now: text(now) })).now;
  }

  /** Saves this workspace's data under `name` (removed with the workspace). */
  async snapshot(name) {
    const answer = await this.admin('POST', this._query(`/_engage/snapshots/${encodeURIComponent(name)}`));
    this._snapshots.add(name);
    return answer;
  }

  /** Puts this workspace's data back as it was at `snapshot(name)`. */
  restore(name) {
    return this.admin('POST', this._query(`/_engage/snapshots/${encodeURIComponent(name)}/restore`));
  }

  /** This workspace's data as a fixtures object. */
  state() {
    return this.admin('GET', this._query('/_engage/state'));
  }

  /**
   * Loads fixtures: a workspace's entries (`groups`, `users`, `subscriptions`, ...)
   * into this workspace; a whole fixtures file (`workspaces`, `scim_users`) as it is.
   */
  seed(fixtures) {
    const whole = 'workspaces' in fixtures || 'scim_users' in fixtures;
    return this.admin('POST', '/_engage/seed', whole ? fixtures : { workspaces: { [this.workspace]: fixtures } });
  }

  /** Removes the workspace's snapshots, faults and data, keys included. */
  async remove() {
    for (const name of [...this._snapshots].sort()) {
      try {
        await this.admin('DELETE', this._query(`/_engage/snapshots/${encodeURIComponent(name)}`));
      } catch (error) {
        if (error.status !== 404) throw error;
      }
    }
    this._snapshots.clear();
    await this.admin('DELETE', this._query('/_engage/faults'));
    await this.admin('POST', `${this._query('/_engage/reset')}&keep=none`);
  }
}

exports.EngageError = EngageError;
exports.Server = Server;
exports.Workspace = Workspace;
exports.binaryPath = binaryPath;
exports.startEngage = startEngage;
