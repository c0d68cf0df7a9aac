// Browser-test scenarios about one app: its status at a glance in the list and on its page,
// and a sync that shows what it would change before it is confirmed.

import {
  alerts,
  appPath,
  env,
  expectation,
  fail,
  newPage,
  openSignedIn,
  screenshot,
  url,
  waitFor,
  watchErrors,
  watchPosts,
} from "./lib.mjs";

/** The data-* attributes of the first element matching `selector` inside `scope`, or null. */
async function data(scope, selector) {
  const el = scope.locator(selector).first();
  if ((await el.count()) === 0) return null;
  return el.evaluate((e) => ({ ...e.dataset, text: e.innerText.replace(/\s+/g, " ").trim(), html: e.innerHTML }));
}

/**
 * Checks one place (the list's row or the app page) against GANNET_EXPECT: health, last result,
 * and the branch note (pinned at, N commits ahead, amber).
 */
async function checkStatus(scope, where, want) {
  const health = await data(scope, '[data-testid="app-health"]');
  if (health?.health !== want.health) fail(`${where} shows health ${JSON.stringify(health)}, expected ${want.health}`);
  const last = await data(scope, '[data-testid="app-last"]');
  if (last?.status !== want.last) fail(`${where} shows the last result ${JSON.stringify(last)}, expected ${want.last}`);
  const branch = await data(scope, '[data-testid="app-branch"]');
  if (want.pinned) {
    const pin = `pinned at ${want.pinned.slice(0, 7)}`;
    const text = want.ahead ? `${pin}, the branch is ${want.ahead} commit${want.ahead === 1 ? "" : "s"} ahead` : pin;
    // Without GANNET_EXPECT.ahead, how far the branch is ahead is not looked at.
    const ok = want.ahead === undefined ? branch?.text.startsWith(pin) : branch?.text === text;
    if (!ok) fail(`${where} says ${JSON.stringify(branch?.text)}, expected ${JSON.stringify(text)}`);
    if (!branch.html.includes("badge-warn")) fail(`${where}: ${JSON.stringify(branch.text)} is not amber: ${branch.html}`);
  } else if (want.ahead === undefined) {
    // Not looked at.
  } else if (want.ahead) {
    const text = `${want.ahead} commit${want.ahead === 1 ? "" : "s"} behind its branch`;
    if (!branch || branch.text !== text) fail(`${where} says ${JSON.stringify(branch?.text)}, expected ${JSON.stringify(text)}`);
  } else if (branch) {
    fail(`${where} says ${JSON.stringify(branch.text)} of an app neither paused nor behind`);
  }
  return [health.text, last.text, branch?.text].filter(Boolean).join("; ");
}

/**
 * app-status: the apps list's row of GANNET_APP and its page show its health as
 * GANNET_EXPECT.health ("NO_LIVE_STATE" for an app without live state, whose page must then not
 * claim the live state matches Git), its last deployment's result GANNET_EXPECT.last, and, with
 * GANNET_EXPECT.pinned, "pinned at <commit>" in amber, followed by ", the branch is N commits
 * ahead" with GANNET_EXPECT.ahead (N); with ahead alone, "N commits behind its branch"; with
 * ahead null or 0, neither (the branch is level); without ahead, how far is not looked at.
 */
export async function appStatus(browser) {
  const want = expectation();
  if (!want.health || !want.last) fail("GANNET_EXPECT.health and .last are required");
  const app = env("GANNET_APP");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, "/apps");
  const row = page.locator(`tr[data-app="${app}"]`);
  await waitFor(`${app}'s row`, () => row.isVisible(), { detail: () => alerts(page) });
  const listed = await checkStatus(row, "the apps list", want);

  await page.goto(url(appPath()));
  const facts = page.locator("dl.facts");
  await waitFor("the app's facts", () => facts.isVisible(), { detail: () => alerts(page) });
  const shown = await checkStatus(facts, "the app page", want);
  const empty = page.getByTestId("drift-empty");
  const drift = (await empty.count()) ? await empty.innerText() : `${await page.locator("table.drift tbody tr").count()} drifted fields`;
  if (want.health === "NO_LIVE_STATE") {
    if (!drift.startsWith("No live state:")) fail(`the drift section says: ${drift}`);
    if (drift.includes("matches Git")) fail(`an app without live state claims: ${drift}`);
  }
  if (want.health === "MISSING" && drift.includes("matches Git")) fail(`an app whose resources are missing claims: ${drift}`);
  await screenshot(page, `${app}.png`);
  if (errors.length) fail(`the console reported errors: ${errors.join("; ")}`);
  console.log(`app-status: ${app}: list: ${listed} | page: ${shown} | drift: ${drift}`);
}

/** The diff block's status once it has loaded (not LOADING). */
async function loadedDiff(scope, what, notAt = null) {
  const diff = scope.getByTestId("diff");
  // With `notAt`, the diff shown before (at that commit) is still on the page until the new
  // one starts loading, and clearing the commit field loads the head once before Compare
  // loads it again: wait for one at another commit that stays loaded.
  const loaded = async () =>
    (await diff.count()) === 1 &&
    (await diff.getAttribute("data-status")) !== "LOADING" &&
    (notAt === null || (await diff.getAttribute("data-commit")) !== notAt);
  const detail = async () => ((await diff.count()) ? `it shows ${JSON.stringify(await diff.innerText())}` : "no diff shown");
  await waitFor(`${what} to load`, loaded, { detail });
  if (notAt !== null) {
    await scope.page().waitForTimeout(1000);
    await waitFor(`${what} to load again`, loaded, { detail });
  }
  return { status: await diff.getAttribute("data-status"), text: (await diff.innerText()).replace(/\s+/g, " ").trim(), diff };
}

/** Fails unless `got` (a loaded diff) lists exactly the fields `fields`, or says `message`. */
async function checkDiff(got, what, want) {
  if (want.fields) {
    if (got.status !== "OUT_OF_SYNC") fail(`${what} is ${got.status}, expected OUT_OF_SYNC: ${got.text}`);
    const fields = await got.diff.locator("table.drift tbody th").allInnerTexts();
    const sorted = (l) => [...l].map((f) => f.trim()).sort();
    if (JSON.stringify(sorted(fields)) !== JSON.stringify(sorted(want.fields))) {
      fail(`${what} lists the fields ${JSON.stringify(fields)}, expected ${JSON.stringify(want.fields)}: ${got.text}`);
    }
  } else if (want.message) {
    if (got.status !== "NOT_COMPARED" || !got.text.includes(want.message)) {
      fail(`${what} shows ${got.status}: ${JSON.stringify(got.text)}, expected the server's ${JSON.stringify(want.message)}`);
    }
  }
}

/**
 * sync-diff: on GANNET_APP's page, as a deployer:
 * - with GANNET_EXPECT.same_as (a commit), "Compare" at that commit says nothing would change;
 * - Sync opens a panel showing what deploying the branch head would change: the drifted fields
 *   GANNET_EXPECT.fields, or, when nothing can be compared, the server's words
 *   GANNET_EXPECT.message; the strategies auto, quick sync and pipeline are offered;
 * - Cancel closes it with no request sent;
 * - unless GANNET_EXPECT.confirm is false, Sync again, choose GANNET_EXPECT.strategy
 *   ("QUICK_SYNC", "PIPELINE" or "" for auto) and Confirm: exactly one sync is sent, with that
 *   strategy, and the page moves to the new deployment. Prints {"deployment": ID} last.
 */
export async function syncDiff(browser) {
  const want = expectation();
  if (!want.fields && !want.message) fail("GANNET_EXPECT needs fields or message");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  const posts = watchPosts(page);
  await openSignedIn(page, appPath());
  const sync = page.getByTestId("sync");
  await waitFor("the Sync button", () => sync.isVisible(), { detail: () => alerts(page) });

  const section = page.getByTestId("changes");
  if (want.same_as) {
    await page.getByTestId("diff-commit").fill(want.same_as);
    await page.getByTestId("diff-compare").click();
    const got = await loadedDiff(section, `the diff at ${want.same_as.slice(0, 7)}`);
    if (got.status !== "SYNCED" || !got.text.includes("would change nothing")) {
      fail(`the diff at ${want.same_as.slice(0, 7)} (the running commit) says ${got.status}: ${got.text}`);
    }
    await page.getByTestId("diff-commit").fill("");
  }
  // The app page's own comparison with the branch head says what the panel will.
  await page.getByTestId("diff-compare").click();
  const atHead = await loadedDiff(section, "the app page's diff at the branch head", want.same_as ?? null);
  await checkDiff(atHead, "the app page's diff", want);

  await sync.click();
  const panel = page.getByTestId("sync-panel");
  await waitFor("the sync panel", () => panel.isVisible());
  if ((await sync.getAttribute("aria-expanded")) !== "true") fail("the Sync button does not say its panel is open");
  const got = await loadedDiff(panel, "the sync panel's diff");
  await checkDiff(got, "the sync panel's diff", want);
  for (const s of ["AUTO", "QUICK_SYNC", "PIPELINE"]) {
    if ((await panel.getByTestId(`strategy-${s}`).count()) !== 1) fail(`the panel offers no strategy ${s}`);
  }
  if (!(await panel.getByTestId("strategy-AUTO").isChecked())) fail("the panel does not start on the automatic strategy");
  await screenshot(page, "sync-panel.png");

  await panel.getByTestId("sync-cancel").click();
  await waitFor("the panel to close", async () => (await panel.count()) === 0);
  await page.waitForTimeout(1500);
  if (posts.length) fail(`Cancel sent ${JSON.stringify(posts)}`);

  // The diff's 409 (nothing to compare) is an answer the page shows, not an error of its own.
  const expected = (e) => want.message && e.includes("status of 409");
  if (errors.some((e) => !expected(e))) fail(`the console reported errors: ${errors.join("; ")}`);
  if (want.confirm === false) {
    console.log(`sync-diff: the panel showed ${got.status}: ${got.text}; Cancel sent nothing`);
    return;
  }
  await sync.click();
  await waitFor("the sync panel again", () => panel.isVisible());
  await loadedDiff(panel, "the sync panel's diff, opened again");
  const strategy = want.strategy ?? "";
  await panel.getByTestId(`strategy-${strategy || "AUTO"}`).check();
  await panel.getByTestId("sync-confirm").click();
  await waitFor(
    "the page of the new deployment",
    async () => /^\/deployments\/[^/]+$/.test(new URL(page.url()).pathname) && (await page.getByTestId("deployment-page").count()) > 0,
    { detail: async () => `at ${page.url()}; sent ${JSON.stringify(posts)}; ${await alerts(page)}` },
  );
  if (posts.length !== 1 || !posts[0].path.endsWith("/sync")) fail(`Confirm sent ${JSON.stringify(posts)}, expected one sync`);
  const body = JSON.parse(posts[0].body || "{}");
  if ((body.strategy ?? "") !== strategy) fail(`the sync asked for strategy ${JSON.stringify(body.strategy)}, expected ${JSON.stringify(strategy)}`);
  if (errors.some((e) => !expected(e))) fail(`the console reported errors: ${errors.join("; ")}`);
  const id = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]);
  console.log(`sync-diff: the panel showed ${got.status}: ${got.text}; Cancel sent nothing; Confirm sent ${posts[0].body}`);
  console.log(JSON.stringify({ deployment: id }));
}
