// A tiny History-API router: the current path and query as a store, navigate(), and one
// document-level click handler that turns clicks on same-origin links into navigations.

import { store, useStore } from "./store";

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

export const location = store<Location>(current());

export function useLocation(): Location {
  return useStore(location);
}

export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  location.set(current());
  if (!replace) window.scrollTo(0, 0);
}

/** Replaces the query string (filters), keeping the path; empty values are dropped. */
export function setQuery(params: Record<string, string>): void {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  navigate(window.location.pathname + (s ? `?${s}` : ""), true);
}

/** Builds "/path?k=v" from parts, dropping empty values. */
export function href(path: string, params: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export function installRouter(): void {
  window.addEventListener("popstate", () => location.set(current()));
  document.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) {
      return;
    }
    const a = (e.target as Element | null)?.closest?.("a");
    if (!a || a.target || a.hasAttribute("download")) return;
    if (a.getAttribute("href")?.startsWith("#")) return; // in-page anchors (skip link)
    const url = new URL(a.href, window.location.href);
    if (url.origin !== window.location.origin || url.pathname.startsWith("/api/")) return;
    e.preventDefault();
    navigate(url.pathname + url.search);
  });
}
