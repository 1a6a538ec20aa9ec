/// <reference types="node" />
import type { ChildProcess } from 'node:child_process';

/** Options of {@link startEngage}. */
export interface StartOptions {
  /** Another `engage` binary than the bundled one. */
  binary?: string;
  /** More `engage serve` arguments, e.g. `['--strict']`. */
  args?: string[];
  /** How long to wait for `/readyz` (default 30000). */
  readyTimeoutMs?: number;
}

/** A journal filter, as `POST /_engage/requests/find` takes it (the workspace is filled in). */
export interface RequestFilter {
  method?: string;
  /** The path sent, or the route's pattern. */
  path?: string;
  status?: number;
  /** JSON the request body contains. */
  body?: unknown;
  since?: string | Date;
  [key: string]: unknown;
}

/** A fault, as `POST /_engage/faults` takes it (the workspace is filled in). */
export interface FaultSpec {
  method?: string;
  path?: string;
  status?: number;
  times?: number;
  probability?: number;
  delay_ms?: number;
  retry_after_secs?: number;
  [key: string]: unknown;
}

/** One journaled request. */
export interface JournaledRequest {
  at: string;
  method: string;
  path: string;
  route: string;
  status: number;
  workspace?: string;
  request_id?: string;
  fault?: string;
  request_body?: unknown;
  response_body?: unknown;
  [key: string]: unknown;
}

/** An admin call that failed. */
export class EngageError extends Error {
  method: string;
  path: string;
  /** null when the server did not answer. */
  status: number | null;
  body: string;
}

/** A running `engage serve --ephemeral`. */
export class Server {
  readonly url: string;
  readonly adminToken: string;
  readonly process: ChildProcess;
  /** The server's latest output (at most 16 KiB). */
  log(): string;
  /** Any operator route; resolves to the response's JSON. */
  admin(method: string, path: string, body?: unknown): Promise<any>;
  /** A new workspace with an all-permissions key. */
  newWorkspace(name?: string, apiKey?: string): Promise<Workspace>;
  /** Stops the server; its database goes with it. */
  stop(): Promise<void>;
}

/** One workspace: what the client under test needs, and the test kit's routes. */
export class Workspace {
  readonly server: Server;
  readonly url: string;
  readonly apiKey: string;
  readonly workspace: string;
  admin(method: string, path: string, body?: unknown): Promise<any>;
  requests(filter?: RequestFilter): Promise<JournaledRequest[]>;
  count(filter?: RequestFilter): Promise<number>;
  /** Resolves to the fault's id. */
  fault(spec: FaultSpec): Promise<string>;
  /** Resolves to the workspace's new time. */
  advanceClock(secs: number): Promise<string>;
  setClock(now: string | Date): Promise<string>;
  snapshot(name: string): Promise<any>;
  restore(name: string): Promise<any>;
  /** The workspace's data as a fixtures object. */
  state(): Promise<Record<string, unknown>>;
  /** A workspace's entries (`groups`, `users`, ...) or a whole fixtures file. */
  seed(fixtures: Record<string, unknown>): Promise<{ loaded: number; already_loaded?: boolean }>;
  /** Removes the workspace's snapshots, faults and data, keys included. */
  remove(): Promise<void>;
}

/** Starts `engage serve --ephemeral` (test clock and faults on) on a free port of 127.0.0.1. */
export function startEngage(options?: StartOptions): Promise<Server>;

/** The path of the bundled binary. */
export function binaryPath(): string;
