// What deploying a commit of an app would change, from the diff API: the app's live state read
// now (or, for a caller who may not deploy an app whose read runs code, its last drift check)
// compared with that commit. An answer that compares nothing (an app no platform plugin
// deploys, a config that does not parse) is shown as the server words it.

import { useEffect, useState } from "preact/hooks";
import { api, ApiError, Unreachable, type DiffView } from "../api";
import { ago, dateTime, shortSha } from "../format";
import { DriftTable } from "./Tables";

type Loaded = { state: "loading" } | { state: "done"; diff: DiffView } | { state: "failed"; why: string };

/** Loads the diff of `app` at `commit` (the branch head when "") each time `round` changes; 0 loads nothing. */
export function useDiff(app: string, commit: string, round: number): Loaded | null {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  useEffect(() => {
    if (round === 0) return;
    let stopped = false;
    setLoaded({ state: "loading" });
    api.diff(app, commit || undefined).then(
      (diff) => !stopped && setLoaded({ state: "done", diff }),
      (e: unknown) => {
        if (stopped) return;
        const why =
          e instanceof Unreachable
            ? "the server is unreachable"
            : e instanceof ApiError
              ? e.message
              : String(e);
        setLoaded({ state: "failed", why });
      },
    );
    return () => {
      stopped = true;
    };
  }, [app, commit, round]);
  return loaded;
}

/** A loaded diff: what would change (a table of fields), that nothing would, or why nothing was compared. */
export function Diff({ loaded, commit }: { loaded: Loaded; commit: string }) {
  const what = commit ? `commit ${shortSha(commit)}` : "the branch head";
  if (loaded.state === "loading") {
    return (
      <p class="loading" data-testid="diff" data-status="LOADING" role="status">
        Comparing the live state with {what}…
      </p>
    );
  }
  if (loaded.state === "failed") {
    return (
      <div class="diff" data-testid="diff" data-status="NOT_COMPARED">
        <p class="notice notice-info">
          <span>
            Nothing was compared with {what}: {loaded.why}
          </span>
        </p>
      </div>
    );
  }
  const d = loaded.diff;
  const sha = <code title={d.commit}>{shortSha(d.commit)}</code>;
  const now = Date.now();
  return (
    <div class="diff" data-testid="diff" data-status={d.status} data-commit={d.commit}>
      {d.drift.length > 0 ? (
        <>
          <p>
            Deploying {sha} would change {d.drift.length} field{d.drift.length === 1 ? "" : "s"}:
          </p>
          <DriftTable drift={d.drift} caption={`What differs between ${shortSha(d.commit)} and the live state`} />
        </>
      ) : (
        <p>
          Deploying {sha} would change nothing: the live state matches it.
        </p>
      )}
      {d.reason && d.drift.length === 0 && <p class="reason">{d.reason}</p>}
      {d.as_of != null && (
        <p class="hint" data-testid="diff-as-of">
          From the last drift check ({dateTime(new Date(d.as_of).toISOString())},{" "}
          {ago(new Date(d.as_of).toISOString(), now)}): reading this app's live state runs its code, which a diff does
          only for a caller who may deploy.
        </p>
      )}
    </div>
  );
}
