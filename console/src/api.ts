// The gannet JSON API: its types (as the server sends them) and one fetch wrapper that adds
// the token, turns `{"error": ...}` answers into ApiError and network failures into
// Unreachable. Fields the server added later are optional here, so the console still works
// against an older server.

import { auth } from "./auth";

export type Role = "viewer" | "deployer" | "approver" | "admin";

export interface Whoami {
  caller: { name: string; role: Role };
  may: { read: boolean; deploy: boolean; approve: boolean };
}

export type SyncStatus = "SYNCED" | "OUT_OF_SYNC" | "DEPLOYING" | "INVALID_CONFIG" | "UNKNOWN";
export type Health = "HEALTHY" | "UNHEALTHY" | "UNKNOWN";

/**
 * A drifted field: each side a JSON value; a side without the field is absent (shown as
 * `<unset>`); a side named in `text` is a description for a person, not a value.
 */
export interface DriftField {
  field: string;
  git?: unknown;
  live?: unknown;
  text?: string[];
}

export interface LiveResource {
  kind: string;
  id: string;
  health: Health;
  summary: string;
}

export interface Paused {
  by: string;
  at: string;
  reason: string;
  commit: string | null;
}

export interface App {
  id: string;
  name: string;
  repo: string;
  path: string;
  kind: string;
  labels: Record<string, string>;
  sync_status: SyncStatus;
  sync_reason: string;
  running_commit: string | null;
  active_deployment: string | null;
  drift?: DriftField[];
  live?: LiveResource[];
  drift_changed_at?: string | null;
  paused?: Paused | null;
  /** HEALTHY, PROGRESSING, DEGRADED, MISSING or UNKNOWN, from the live resources. */
  health?: AppHealth;
  /** Why the app has no live state at all (no compiled-in platform plugin deploys it). */
  no_live_state?: string | null;
  /** How the last deployment ended. */
  last_result?: LastResult | null;
  /** How many commits the branch head has beyond the running commit (absent when 0 or unknown). */
  ahead?: number | null;
  /** The branch head the trigger last saw. */
  head_commit?: string | null;
}

export type AppHealth = "HEALTHY" | "PROGRESSING" | "DEGRADED" | "MISSING" | "UNKNOWN";

export interface LastResult {
  deployment: string;
  status: DeploymentStatus;
  commit: string;
  at: string;
}

export type DeploymentStatus =
  | "PENDING"
  | "PLANNED"
  | "RUNNING"
  | "ROLLING_BACK"
  | "SUCCESS"
  | "FAILURE"
  | "CANCELLED";

export type StageStatus =
  | "NOT_STARTED_YET"
  | "RUNNING"
  | "SUCCESS"
  | "FAILURE"
  | "CANCELLED"
  | "SKIPPED"
  | "EXITED";


/** A resource a stage changes, with its actions and changed attributes. */
export interface ResourceChange {
  address: string;
  actions: string[];
  attributes: { name: string; before: string; after: string }[];
}

/** One block of a stage's details, as its plugin presents it; rendered by shape alone. */
export type Detail =
  | { type: "table"; title: string; columns: string[]; rows: string[][] }
  | { type: "resources"; title: string; summary: string; items: ResourceChange[]; omitted: number };

/** What a stage's plugin shows of it, and what may be done to it now. */
export interface StagePresentation {
  approvable: boolean;
  cancellable: boolean;
  details: Detail[];
  /** The stage's key option in one short line ("20%", "5s", "approvers: alice, bob"). */
  summary?: string;
  /** Who approved the stage. */
  approved_by?: string[];
}

export interface Stage {
  id: string;
  name: string;
  desc: string;
  status: StageStatus;
  status_reason: string;
  rollback: boolean;
  visible: boolean;
  started_at: string | null;
  completed_at: string | null;
  metadata: Record<string, string>;
  presentation?: StagePresentation;
}

export interface Deployment {
  id: string;
  app: string;
  app_id: string;
  kind: string;
  commit: string;
  commit_message: string;
  /** The commit's author ("" when unknown). */
  commit_author?: string;
  /** The commit on GitHub, when the repository is there. */
  commit_url?: string | null;
  branch: string;
  status: DeploymentStatus;
  status_reason: string;
  trigger: string;
  commander: string;
  strategy: "QUICK_SYNC" | "PIPELINE" | null;
  summary: string;
  stages: Stage[];
  running_commit: string | null;
  blocked_by: string | null;
  rollback_of?: string | null;
  /** Set when an admin let this deployment skip the app's approval stages. */
  gate_skip?: { by: string; reason: string } | null;
  /** The deployment chain it belongs to, or started by succeeding. */
  chain?: string | null;
  created_at: string;
  planned_at: string | null;
  completed_at: string | null;
}

export type ChainStatus = "RUNNING" | "SUCCESS" | "FAILURE" | "CANCELLED";

/** One app of a chain's block, and its deployment once the block has started it. */
export interface ChainNode {
  app: string;
  app_name: string;
  status: "WAITING" | "DEPLOYING" | "SUCCESS" | "FAILURE" | "CANCELLED" | "SKIPPED";
  deployment?: string | null;
  reason?: string;
}

export interface ChainBlock {
  /** What selected its apps ("name one, kind LAMBDA"); "" for block 0. */
  matcher: string;
  status: "PENDING" | "RUNNING" | "SUCCESS" | "FAILURE" | "CANCELLED";
  nodes: ChainNode[];
  started_at?: string | null;
  completed_at?: string | null;
}

/** A deployment chain (an app's spec.postSync.chain); block 0 is the deployment that started it. */
export interface Chain {
  id: string;
  first: string;
  app_id: string;
  app: string;
  status: ChainStatus;
  status_reason: string;
  blocks: ChainBlock[];
  cancelled_by?: string | null;
  created_at: string;
  updated_at: string;
  completed_at?: string | null;
}

export type PreviewStatus = "QUEUED" | "RUNNING" | "DONE" | "SUPERSEDED" | "FAILED";
export type PreviewResult = "PENDING" | "NO_CHANGES" | "CHANGES" | "ERROR";

/** One app's part of a plan preview. */
export interface AppPreview {
  app: string;
  /** Its spec.name, or its directory when its config cannot be read. */
  name: string;
  /** Its platform (KUBERNETES, TERRAFORM, ...); "" when its config cannot be read. */
  kind: string;
  result: PreviewResult;
  summary: string;
  /** The pipeline the merge would run, with the planner's reason. */
  pipeline: string;
  /** The trigger rule that selected it. */
  why: string;
  /** The platform's own preview (a plan, a diff), or the files' diff, or the error. */
  details: string;
  /** Read with the deploy target's planPreview credentials (false: files compared only). */
  credentials: boolean;
}

/**
 * A plan preview: what merging a pull request's head (or a commit a CI system named) into the
 * repository's watched branch would change. Times are milliseconds since the epoch.
 */
export interface Preview {
  id: string;
  repo: string;
  pr: number | null;
  head: string;
  base_ref: string;
  base: string | null;
  merge_base: string | null;
  author: string;
  fork: boolean;
  credentials: boolean;
  status: PreviewStatus;
  result: PreviewResult;
  reason: string;
  check_run: number | null;
  apps: AppPreview[];
  created_at: number;
  started_at: number | null;
  updated_at: number;
}

export interface LogLine {
  seq: number;
  /** When the line was written, in milliseconds since the epoch. */
  at: number;
  text: string;
  /** The line came from a job's standard error. */
  stderr?: boolean;
}

/** One page of the deployments list; `next` is the cursor (`before`) of the page after it. */
export interface DeploymentsPage {
  deployments: Deployment[];
  next?: string | null;
}

/** What deploying a commit would change: the live state compared with the commit. */
export interface DiffView {
  app: string;
  commit: string;
  /** SYNCED (nothing would change) or OUT_OF_SYNC (`drift` lists what would). */
  status: SyncStatus;
  reason: string;
  drift: DriftField[];
  live: LiveResource[];
  /** Set when the answer is the app's last drift check rather than a read made now. */
  as_of?: number | null;
  age_seconds?: number | null;
}

export type Strategy = "QUICK_SYNC" | "PIPELINE";

/** The server answered with an error status; `message` is its `{"error"}` text. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The request never got an answer (server down, network gone). Pollers retry these. */
export class Unreachable extends Error {
  constructor() {
    super("server unreachable");
  }
}

const TERMINAL: ReadonlySet<DeploymentStatus> = new Set(["SUCCESS", "FAILURE", "CANCELLED"]);

export function isTerminal(status: DeploymentStatus): boolean {
  return TERMINAL.has(status);
}

async function call<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = auth.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (method === "POST") headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: method === "POST" ? JSON.stringify(body ?? {}) : undefined,
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new Unreachable();
  }
  // A proxy in front of a stopped server answers 502/503/504: treat it as unreachable too.
  if (res.status === 502 || res.status === 503 || res.status === 504) throw new Unreachable();
  let data: unknown = null;
  try {
    data = await res.json();
  } catch {
    // Not JSON: keep data null and report the status below.
  }
  if (!res.ok) {
    const message =
      data && typeof (data as { error?: unknown }).error === "string"
        ? (data as { error: string }).error
        : `HTTP ${res.status}`;
    if (res.status === 401) auth.rejected(message);
    throw new ApiError(res.status, message);
  }
  return data as T;
}

const enc = encodeURIComponent;

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

export const api = {
  whoami: () => call<Whoami>("GET", "/api/v1/whoami"),
  apps: () => call<{ apps: App[] }>("GET", "/api/v1/apps").then((r) => r.apps),
  app: (name: string) => call<{ app: App }>("GET", `/api/v1/apps/${enc(name)}`).then((r) => r.app),
  deployments: (f: { app?: string; status?: string; limit?: number }) =>
    call<DeploymentsPage>("GET", `/api/v1/deployments${query(f)}`).then((r) => r.deployments),
  /** One page, newest first: those created before deployment `before` when it is given. */
  deploymentsPage: (f: { app?: string; status?: string; limit?: number; before?: string }) =>
    call<DeploymentsPage>("GET", `/api/v1/deployments${query(f)}`),
  deployment: (id: string) =>
    call<{ deployment: Deployment }>("GET", `/api/v1/deployments/${enc(id)}`).then(
      (r) => r.deployment,
    ),
  logs: (id: string, stage: string, after: number) =>
    call<{ lines: LogLine[] }>(
      "GET",
      `/api/v1/deployments/${enc(id)}/stages/${enc(stage)}/logs${query({ after })}`,
    ).then((r) => r.lines),
  /** What deploying `commit` (the branch head when absent) would change. */
  diff: (app: string, commit?: string) =>
    call<{ diff: DiffView }>("GET", `/api/v1/apps/${enc(app)}/diff${query({ commit })}`).then(
      (r) => r.diff,
    ),
  sync: (app: string, strategy?: Strategy) =>
    call<{ deployment: Deployment }>(
      "POST",
      `/api/v1/apps/${enc(app)}/sync`,
      strategy ? { strategy } : {},
    ).then((r) => r.deployment),
  cancel: (id: string, noRollback: boolean) =>
    call<{ deployment: Deployment }>(
      "POST",
      `/api/v1/deployments/${enc(id)}/cancel`,
      noRollback ? { no_rollback: true } : {},
    ).then((r) => r.deployment),
  approve: (id: string, stage: string) =>
    call<{ deployment: Deployment }>("POST", `/api/v1/deployments/${enc(id)}/approve`, {
      stage,
    }).then((r) => r.deployment),
  chains: (f: { status?: string; limit?: number }) =>
    call<{ chains: Chain[] }>("GET", `/api/v1/chains${query(f)}`).then((r) => r.chains),
  chain: (id: string) =>
    call<{ chain: Chain }>("GET", `/api/v1/chains/${enc(id)}`).then((r) => r.chain),
  cancelChain: (id: string) =>
    call<{ chain: Chain }>("POST", `/api/v1/chains/${enc(id)}/cancel`, {}).then((r) => r.chain),
  previews: (f: { repo?: string; pr?: string; limit?: number }) =>
    call<{ previews: Preview[] }>("GET", `/api/v1/plan-previews${query(f)}`).then((r) => r.previews),
  preview: (id: string) =>
    call<{ preview: Preview }>("GET", `/api/v1/plan-previews/${enc(id)}`).then((r) => r.preview),
  pause: (app: string, reason: string) =>
    call<{ app: App }>("POST", `/api/v1/apps/${enc(app)}/pause`, reason ? { reason } : {}).then(
      (r) => r.app,
    ),
  resume: (app: string) =>
    call<{ app: App }>("POST", `/api/v1/apps/${enc(app)}/resume`, {}).then((r) => r.app),
  rollback: (app: string, to?: string) =>
    call<{ deployment: Deployment }>(
      "POST",
      `/api/v1/apps/${enc(app)}/rollback`,
      to ? { to } : {},
    ).then((r) => r.deployment),
};
