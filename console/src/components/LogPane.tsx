// One stage's log. The lines go straight into a <pre> as text nodes (one per fetched page),
// outside Preact's diffing, so thousands of lines cost one DOM append per poll and a
// re-render of the deployment page never touches them. The pane polls with the `after=`
// cursor, never fetching a line twice, while it is open and the stage may still write.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, Unreachable } from "../api";
import { backoff, reportDown, reportUp } from "../notices";

const POLL_MS = 1000;

interface Props {
  deployment: string;
  stage: string;
  /** The pane is shown: only then does it fetch. */
  open: boolean;
  /** The stage may still write lines (it has not finished). */
  live: boolean;
}

export function LogPane({ deployment, stage, open, live }: Props) {
  const pre = useRef<HTMLPreElement>(null);
  const cursor = useRef(0);
  const complete = useRef(false);
  const liveRef = useRef(live);
  liveRef.current = live;
  const [lines, setLines] = useState(0);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (!open || complete.current) return;
    let stopped = false;
    let timer: number | undefined;
    let failures = 0;
    const fetchMore = async () => {
      // Whether the stage had already finished before this request: only then does an
      // empty answer mean the log is complete.
      const finishedBefore = !liveRef.current;
      try {
        const page = await api.logs(deployment, stage, cursor.current);
        if (stopped) return;
        failures = 0;
        reportUp();
        setError(null);
        if (page.length > 0) {
          append(page.map((l) => l.text));
          cursor.current = page[page.length - 1].seq;
          setLines((n) => n + page.length);
          timer = window.setTimeout(fetchMore, 0); // there may be more: keep going until caught up
        } else if (finishedBefore) {
          complete.current = true;
        } else {
          timer = window.setTimeout(fetchMore, POLL_MS);
        }
      } catch (e) {
        if (stopped) return;
        if (e instanceof Unreachable) {
          failures += 1;
          reportDown(backoff(failures));
          timer = window.setTimeout(fetchMore, backoff(failures));
        } else if (e instanceof ApiError) {
          setError(e.message);
          if (e.status !== 401) timer = window.setTimeout(fetchMore, 5000);
        }
      }
    };
    fetchMore();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [open, live, deployment, stage]);

  function append(texts: string[]) {
    const el = pre.current;
    if (!el) return;
    // Follow the tail when the reader is at the bottom (or the pane was empty until now).
    const first = !el.firstChild;
    if (first) el.classList.remove("log-empty");
    const atBottom = first || el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
    el.appendChild(document.createTextNode(texts.join("\n") + "\n"));
    if (atBottom) el.scrollTop = el.scrollHeight;
  }

  return (
    <div class="log">
      <pre
        ref={pre}
        class={lines === 0 ? "log-lines log-empty" : "log-lines"}
        data-testid={`log-${stage}`}
        tabIndex={0}
        aria-label={`Log of stage ${stage}`}
      />
      {lines === 0 && !error && <p class="muted log-note">{live ? "No log lines yet." : "No log output."}</p>}
      {error && <p class="notice notice-error">{error}</p>}
    </div>
  );
}
