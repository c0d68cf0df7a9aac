// One stage's log. The lines go straight into a <pre> outside Preact's diffing, so thousands of
// lines cost one DOM append per poll and a re-render of the deployment page never touches them:
// each fetched page becomes one fragment, its runs of ordinary lines one text node each and its
// standard-error lines one marked <span> each. The pane polls with the `after=` cursor,
// never fetching a line twice, while it is open and the stage may still write.
//
// Above the lines: a timestamp toggle, a search box that keeps only the lines holding its text
// (each match highlighted) and a download of the log as text. Those redraw the <pre> from the
// lines kept in memory; new lines are then appended in the same way.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, Unreachable, type LogLine } from "../api";
import { clockTime } from "../format";
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

/** How the lines are shown: with their times or not, and only those holding `search`. */
interface View {
  timestamps: boolean;
  search: string;
}

export function LogPane({ deployment, stage, open, live }: Props) {
  const pre = useRef<HTMLPreElement>(null);
  const cursor = useRef(0);
  const complete = useRef(false);
  const liveRef = useRef(live);
  liveRef.current = live;
  const kept = useRef<LogLine[]>([]);
  const [lines, setLines] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [view, setView] = useState<View>({ timestamps: false, search: "" });
  const viewRef = useRef(view);
  viewRef.current = view;
  const [matches, setMatches] = useState(0);

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
          kept.current.push(...page);
          append(page);
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

  // A changed view redraws every kept line.
  useEffect(() => {
    const el = pre.current;
    if (!el || kept.current.length === 0) return;
    el.textContent = "";
    setMatches(0);
    append(kept.current);
  }, [view]);

  function append(page: LogLine[]) {
    const el = pre.current;
    if (!el) return;
    // Follow the tail when the reader is at the bottom (or the pane was empty until now).
    const first = !el.firstChild;
    const atBottom = first || el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
    const { fragment, shown } = render(page, viewRef.current);
    el.appendChild(fragment);
    if (viewRef.current.search) setMatches((n) => n + shown);
    if (atBottom) el.scrollTop = el.scrollHeight;
  }

  function download() {
    const text = kept.current.map((l) => (view.timestamps ? `${new Date(l.at).toISOString()} ${l.text}` : l.text));
    const blob = new Blob([text.join("\n") + "\n"], { type: "text/plain;charset=utf-8" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `${deployment}-${stage}.log.txt`;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  }

  const searching = view.search !== "";
  const empty = lines === 0 || (searching && matches === 0);
  return (
    <div class="log">
      {lines > 0 && (
        <div class="log-tools" data-testid={`log-tools-${stage}`}>
          <label class="check">
            <input
              type="checkbox"
              data-testid="log-timestamps"
              checked={view.timestamps}
              onChange={(e) => setView({ ...view, timestamps: (e.target as HTMLInputElement).checked })}
            />
            Timestamps
          </label>
          <label class="inline log-search">
            Search
            <input
              type="search"
              data-testid="log-search"
              value={view.search}
              onInput={(e) => setView({ ...view, search: (e.target as HTMLInputElement).value })}
            />
          </label>
          <button type="button" class="secondary" data-testid="log-download" onClick={download}>
            Download
          </button>
          <span class="muted" aria-live={searching ? "polite" : "off"} data-testid="log-count">
            {searching ? `${matches} of ${lines} lines` : `${lines} lines`}
          </span>
        </div>
      )}
      <pre
        ref={pre}
        class={empty ? "log-lines log-empty" : "log-lines"}
        data-testid={`log-${stage}`}
        tabIndex={0}
        aria-label={`Log of stage ${stage}`}
      />
      {lines === 0 && !error && <p class="muted log-note">{live ? "No log lines yet." : "No log output."}</p>}
      {lines > 0 && searching && matches === 0 && <p class="muted log-note">No line holds “{view.search}”.</p>}
      {error && <p class="notice notice-error">{error}</p>}
    </div>
  );
}

/**
 * `page` as DOM nodes for `view`, and how many lines it shows. Without a search or times, each
 * run of ordinary lines becomes one text node and each standard-error line a marked <span>;
 * with them, each shown line is its own <span> (its time and its matches marked).
 */
function render(page: LogLine[], view: View): { fragment: DocumentFragment; shown: number } {
  const fragment = document.createDocumentFragment();
  const needle = view.search.toLowerCase();
  const plain = !view.timestamps && !needle;
  let shown = 0;
  let run: string[] = [];
  const flush = () => {
    if (run.length === 0) return;
    fragment.appendChild(document.createTextNode(run.join("\n") + "\n"));
    run = [];
  };
  for (const line of page) {
    const stderr = line.stderr === true;
    if (plain && !stderr) {
      run.push(line.text);
      shown += 1;
      continue;
    }
    if (needle && !line.text.toLowerCase().includes(needle)) continue;
    flush();
    shown += 1;
    const row = document.createElement("span");
    row.className = stderr ? "log-line log-stderr" : "log-line";
    if (view.timestamps) {
      const at = document.createElement("span");
      at.className = "log-time";
      at.textContent = `${clockTime(line.at)} `;
      row.appendChild(at);
    }
    highlight(row, line.text, needle);
    row.appendChild(document.createTextNode("\n"));
    fragment.appendChild(row);
  }
  flush();
  return { fragment, shown };
}

/** Appends `text` to `into`, each case-insensitive occurrence of `needle` in a <mark>. */
function highlight(into: HTMLElement, text: string, needle: string) {
  const lower = text.toLowerCase();
  // (A few characters change length in lower case; such a line is shown unmarked.)
  if (!needle || lower.length !== text.length) {
    into.appendChild(document.createTextNode(text));
    return;
  }
  let from = 0;
  for (let at = lower.indexOf(needle); at >= 0; at = lower.indexOf(needle, from)) {
    if (at > from) into.appendChild(document.createTextNode(text.slice(from, at)));
    const mark = document.createElement("mark");
    mark.textContent = text.slice(at, at + needle.length);
    into.appendChild(mark);
    from = at + needle.length;
  }
  if (from < text.length) into.appendChild(document.createTextNode(text.slice(from)));
}
