// Text for times, durations and commits. No date library: RFC 3339 parses with Date.

export function shortSha(sha: string | null | undefined): string {
  return sha ? sha.slice(0, 7) : "—";
}

/** A deployment id as lists show it ("d-" and 8 hex digits); the full id goes in a title. */
export function shortId(id: string): string {
  return id.slice(0, 10);
}

function ms(iso: string | null | undefined): number | null {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

/** "2024-05-01 13:02:07" in the viewer's time zone. */
export function dateTime(iso: string | null | undefined): string {
  const t = ms(iso);
  if (t === null) return "—";
  const d = new Date(t);
  const p = (n: number) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
  );
}

/** A duration as "850ms", "42s", "3m 07s" or "2h 05m". */
export function duration(millis: number): string {
  if (millis < 0) millis = 0;
  if (millis < 1000) return `${Math.round(millis)}ms`;
  const s = Math.floor(millis / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

/** How long something took, or has taken so far when it has not ended; "" before it starts. */
export function elapsed(start: string | null, end: string | null, now: number): string {
  const s = ms(start);
  if (s === null) return "";
  return duration((ms(end) ?? now) - s);
}

/** "5m ago" style, for lists. */
export function ago(iso: string | null | undefined, now: number): string {
  const t = ms(iso);
  if (t === null) return "—";
  const s = Math.round((now - t) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** Status words as people read them: "OUT_OF_SYNC" -> "out of sync". */
export function words(status: string): string {
  return status.toLowerCase().replace(/_/g, " ");
}

/** Ends text with a full stop unless it already ends a sentence. */
export function sentence(text: string): string {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/** The viewer's calendar day of `t` as "2024-05-01", the key deployments are grouped by. */
export function dayKey(t: number): string {
  const d = new Date(t);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

/** A day heading: "Today", "Yesterday", else "Wed 2024-05-01" (the viewer's time zone). */
export function dayLabel(iso: string, now: number): string {
  const t = ms(iso);
  if (t === null) return "Unknown day";
  const key = dayKey(t);
  const today = new Date(now);
  if (key === dayKey(now)) return "Today";
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1, 12);
  if (key === dayKey(yesterday.getTime())) return "Yesterday";
  return `${WEEKDAYS[new Date(t).getDay()]} ${key}`;
}

/** A log line's time, "13:02:07.250" in the viewer's time zone. */
export function clockTime(millis: number): string {
  const d = new Date(millis);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/** "1 commit" / "3 commits". */
export function commits(n: number): string {
  return `${n} commit${n === 1 ? "" : "s"}`;
}
