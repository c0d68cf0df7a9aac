// Helpers for the browser-test scenarios: environment, bounded waits, signing in, and
// collecting console errors and CSP violations.

import { mkdir } from "node:fs/promises";
import { join } from "node:path";

export const LAPTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** A page in a fresh browser context (its own session storage) at `viewport`. */
export async function newPage(browser, viewport = LAPTOP) {
  const context = await browser.newContext({ viewport });
  return context.newPage();
}

/** The page of deployment GANNET_DEPLOYMENT (as given: a short id stays short). */
export const deploymentPath = () => `/deployments/${encodeURIComponent(env("GANNET_DEPLOYMENT"))}`;

/** The page of app GANNET_APP. */
export const appPath = () => `/apps/${encodeURIComponent(env("GANNET_APP"))}`;

/** Waits until the page at `path` shows its data (`ready` matches), then lets polls settle. */
export async function visit(page, path, ready) {
  const res = await page.goto(url(path));
  await waitFor(`${path} to show its content`, async () => (await page.locator(ready).count()) > 0, {
    detail: () => alerts(page),
  });
  await page.waitForTimeout(300);
  return res;
}

/**
 * Fails unless the page fits `width`: the document does not scroll sideways, and every row of
 * the list tables (apps, deployments) lies inside the viewport (read as a card, not scrolled
 * inside its box). Returns how many rows were checked.
 */
export async function assertFits(page, path, width) {
  const found = await page.evaluate((w) => {
    const rows = [...document.querySelectorAll("table.collapse tbody tr")];
    const outside = rows
      .filter((r) => r.getBoundingClientRect().right > w + 0.5 || r.scrollWidth > r.clientWidth + 1)
      .map((r) => r.innerText.replace(/\s+/g, " ").slice(0, 80));
    return { scrollWidth: document.documentElement.scrollWidth, rows: rows.length, outside };
  }, width);
  if (found.scrollWidth > width) fail(`${path} is ${found.scrollWidth}px wide at ${width}px: the page scrolls sideways`);
  if (found.outside.length) fail(`${path}: rows wider than ${width}px: ${found.outside.join(" | ")}`);
  return found.rows;
}

/** Collects every request to the API's POST routes from now on (method, path, body). */
export function watchPosts(page) {
  const posts = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && new URL(r.url()).pathname.startsWith("/api/")) {
      posts.push({ path: new URL(r.url()).pathname, body: r.postData() ?? "" });
    }
  });
  return posts;
}

/** A scenario's failed assertion: run.mjs prints its message and exits 1. */
export class Failure extends Error {}

export function fail(message) {
  throw new Failure(message);
}

export function env(name, { required = true } = {}) {
  const v = process.env[name];
  if (required && !v) fail(`${name} is not set`);
  return v ?? "";
}

/** GANNET_EXPECT parsed ({} when unset). */
export function expectation() {
  const raw = process.env.GANNET_EXPECT;
  if (!raw) return {};
  try {
    return JSON.parse(raw);
  } catch (e) {
    fail(`GANNET_EXPECT is not JSON: ${e.message}`);
  }
}

/** How long any single wait may take: GANNET_EXPECT.timeout_ms, default 30 s. */
export function timeoutMs() {
  return Number(expectation().timeout_ms ?? 30_000);
}

/**
 * Calls `check` every `every` ms until it returns a truthy value (returned), failing with
 * "timed out after Ns waiting for <what>" (and `detail()` if given) past the timeout.
 */
export async function waitFor(what, check, { timeout = timeoutMs(), every = 50, detail } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) {
      const more = detail ? `; ${await detail()}` : "";
      fail(`timed out after ${Math.round(timeout / 1000)}s waiting for ${what}${more}`);
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

export function url(path) {
  return env("GANNET_URL").replace(/\/$/, "") + path;
}

/** Opens `path` and signs in there with GANNET_TOKEN through the form. */
export async function openSignedIn(page, path, token = env("GANNET_TOKEN")) {
  await page.goto(url(path));
  await signIn(page, token);
}

export async function signIn(page, token) {
  const form = page.getByTestId("signin");
  await waitFor("the sign-in form", () => form.isVisible());
  await page.getByLabel("API token").fill(token);
  await form.getByRole("button", { name: "Sign in" }).click();
  await waitFor(
    "the header to show who is signed in",
    () => page.getByTestId("caller").isVisible(),
    { detail: () => alerts(page) },
  );
}

/** The alert region's text, for failure messages. */
export async function alerts(page) {
  const text = await page.locator("[role=alert]").allInnerTexts().catch(() => []);
  const joined = text.join(" | ").trim();
  return joined ? `alerts on the page: ${joined}` : "no alert on the page";
}

/** Records console errors, page errors and CSP violations from now on. */
export function watchErrors(page) {
  const errors = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console error: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  // Chromium reports a CSP violation on the console too; the event makes it explicit.
  page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`);
    });
  });
  return errors;
}

export async function screenshot(page, name) {
  const dir = process.env.GANNET_SCREENSHOTS;
  if (!dir) return;
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: join(dir, name), fullPage: true });
}

/** Each stage row's id (without "stage-") and data-status, in page order. */
export async function stageStatuses(page) {
  return page.$$eval('li[data-testid^="stage-"]', (rows) =>
    rows.map((r) => ({ id: r.dataset.testid.slice("stage-".length), status: r.dataset.status, name: r.dataset.name })),
  );
}

export async function deploymentStatus(page) {
  return page.$eval('[data-testid="deployment-status"]', (el) => el.dataset.status).catch(() => null);
}
