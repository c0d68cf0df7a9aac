// A deployment's pipeline: one row per stage with its key option as its plugin sums it up
// ("20%", "5s", "approvers: alice"), who approved it, its status and elapsed time; a row
// expands (click, Enter or Space) to the stage's reason, its plugin's details and its log.

import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { isTerminal, type Deployment, type Stage, type StageStatus } from "../api";
import { elapsed } from "../format";
import { Badge } from "./Badge";
import { Details } from "./Details";
import { LogPane } from "./LogPane";

const STAGE_DONE: ReadonlySet<StageStatus> = new Set(["SUCCESS", "FAILURE", "CANCELLED", "SKIPPED", "EXITED"]);

/** Hidden stages (rollback ones, mostly) are shown once they have run. */
export function shownStages(d: Deployment): Stage[] {
  return d.stages.filter((s) => s.visible || s.status !== "NOT_STARTED_YET");
}

/** The stage waits for approval now, as its plugin says. */
export function waitingForApproval(s: Stage): boolean {
  return s.presentation?.approvable ?? false;
}

interface Props {
  deployment: Deployment;
  now: number;
  /** A stage to open from the URL (?stage=ID). */
  linked: string | null;
  /** Renders the approve control for a waiting stage, or nothing. */
  approve: (s: Stage) => ComponentChildren;
}

export function StageList({ deployment: d, now, linked, approve }: Props) {
  // What the user opened or closed; other stages follow the default (below).
  const [toggled, setToggled] = useState<Record<string, boolean>>({});
  // Stages opened at least once keep their log pane (and its lines) while closed.
  const opened = useRef(new Set<string>()).current;

  // By default the running stage is open, and a failed one (while the deployment rolls back
  // and after it failed), so its last lines show without a click.
  const byDefault = (s: Stage) => s.status === "RUNNING" || s.status === "FAILURE" || s.id === linked;

  // A stage linked from the URL is scrolled into view once, when it first shows.
  const scrolled = useRef(false);
  useEffect(() => {
    if (!linked || scrolled.current) return;
    const row = document.querySelector(`[data-testid="stage-${CSS.escape(linked)}"]`);
    if (row) {
      scrolled.current = true;
      row.scrollIntoView({ block: "start" });
    }
  });

  const stages = shownStages(d);
  if (stages.length === 0) {
    return <p class="empty">{d.status === "PENDING" ? "The pipeline is planned when the deployment starts." : "No stages."}</p>;
  }
  return (
    <ol class="pipeline" aria-label="Stages">
      {stages.map((s) => {
        const open = toggled[s.id] ?? byDefault(s);
        if (open) opened.add(s.id);
        const live = !STAGE_DONE.has(s.status) && !isTerminal(d.status);
        const waiting = waitingForApproval(s);
        const bodyId = `stage-body-${s.id}`;
        return (
          <li
            key={s.id}
            class={`stage stage-${s.status.toLowerCase()}${s.rollback ? " stage-rollback" : ""}`}
            data-testid={`stage-${s.id}`}
            data-status={s.status}
            data-name={s.name}
          >
            <div class="stage-row">
              <button
                type="button"
                class="stage-head"
                aria-expanded={open}
                aria-controls={bodyId}
                onClick={() => setToggled({ ...toggled, [s.id]: !open })}
              >
                <span class="chevron" aria-hidden="true">
                  {open ? "▾" : "▸"}
                </span>
                <span class="stage-name">
                  {s.name}
                  {s.rollback && <span class="tag">rollback</span>}
                </span>
                {s.presentation?.summary && (
                  <span class="stage-summary" data-testid="stage-summary">
                    {s.presentation.summary}
                  </span>
                )}
                <span class="stage-id">{s.id}</span>
                {s.desc && <span class="stage-desc">{s.desc}</span>}
                {(s.presentation?.approved_by ?? []).length > 0 && (
                  <span class="stage-approved" data-testid="stage-approved-by">
                    approved by {(s.presentation?.approved_by ?? []).join(", ")}
                  </span>
                )}
                <span class="stage-status">
                  {waiting ? <Badge status="WAITING" label="waiting for approval" /> : <Badge status={s.status} />}
                </span>
                <span class="stage-time" title="elapsed">
                  {elapsed(s.started_at, s.completed_at, now)}
                </span>
              </button>
              {waiting && approve(s)}
            </div>
            {opened.has(s.id) && (
              <div class="stage-body" id={bodyId} hidden={!open}>
                {s.status_reason && <p class="reason">{s.status_reason}</p>}
                {s.presentation && s.presentation.details.length > 0 && <Details list={s.presentation.details} />}
                <LogPane deployment={d.id} stage={s.id} open={open} live={live} />
              </div>
            )}
          </li>
        );
      })}
    </ol>
  );
}
