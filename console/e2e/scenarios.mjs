// The browser-test scenarios, one exported function each (run.mjs maps a scenario's name to
// its function). Each takes the launched browser, throws Failure with a clear message when an
// assertion does not hold, and bounds every wait (GANNET_EXPECT.timeout_ms, default 30 s).

import {
  alerts,
  assertFits,
  deploymentPath,
  deploymentStatus,
  env,
  expectation,
  fail,
  LAPTOP,
  newPage,
  openSignedIn,
  PHONE,
  screenshot,
  stageStatuses,
  timeoutMs,
  url,
  visit,
  waitFor,
  watchErrors,
} from "./lib.mjs";

const CONTROLS = ["approve", "cancel", "sync", "pause", "resume", "rollback"];

/** Fails when the deployment on the page ended other than `allowed`. */
async function failIfEnded(page, allowed = "SUCCESS") {
  const status = await deploymentStatus(page);
  if (status && status !== allowed && ["SUCCESS", "FAILURE", "CANCELLED"].includes(status)) {
    fail(`the deployment ended ${status}; stages: ${JSON.stringify(await stageStatuses(page))}`);
  }
}

/**
 * stages-in-order: every stage of GANNET_EXPECT.stages reaches SUCCESS, in that order, seen
 * live on one page load (no reload, no navigation).
 */
export async function stagesInOrder(browser) {
  const expected = expectation().stages;
  if (!Array.isArray(expected) || expected.length === 0) fail("GANNET_EXPECT.stages must list stage ids");
  const page = await newPage(browser);
  await openSignedIn(page, deploymentPath());
  await waitFor("the deployment's stages", async () => (await stageStatuses(page)).length > 0, {
    detail: () => alerts(page),
  });
  // Record every stage's status transitions inside the page, as they happen.
  await page.evaluate(() => {
    window.__gannetMarker = "still the same page";
    const seen = new Map();
    const log = (window.__gannetTransitions = []);
    const record = () => {
      for (const row of document.querySelectorAll('li[data-testid^="stage-"]')) {
        const id = row.dataset.testid.slice("stage-".length);
        if (seen.get(id) !== row.dataset.status) {
          seen.set(id, row.dataset.status);
          log.push({ id, status: row.dataset.status, t: Math.round(performance.now()) });
        }
      }
    };
    record();
    new MutationObserver(record).observe(document.body, {
      subtree: true,
      childList: true,
      attributes: true,
      attributeFilter: ["data-status"],
    });
  });
  const transitions = () => page.evaluate(() => window.__gannetTransitions);
  const history = async () =>
    (await transitions()).map((t) => `${t.id}:${t.status}`).join(" → ");

  for (const id of expected) {
    await waitFor(
      `stage ${id} to reach SUCCESS`,
      async () => {
        await failIfEnded(page);
        return (await transitions()).some((t) => t.id === id && t.status === "SUCCESS");
      },
      { detail: async () => `transitions seen: ${await history()}` },
    );
  }

  const log = await transitions();
  const firstSuccess = expected.map((id) => log.findIndex((t) => t.id === id && t.status === "SUCCESS"));
  for (let i = 1; i < expected.length; i++) {
    if (firstSuccess[i] < firstSuccess[i - 1]) {
      fail(`stage ${expected[i]} reached SUCCESS before ${expected[i - 1]}: ${await history()}`);
    }
  }
  for (const id of expected) {
    const after = log.slice(log.findIndex((t) => t.id === id && t.status === "SUCCESS") + 1);
    const back = after.find((t) => t.id === id);
    if (back) fail(`stage ${id} went from SUCCESS back to ${back.status}: ${await history()}`);
  }
  // The page must have shown progress, not only a finished pipeline.
  const live = expected.some((id) => log.some((t) => t.id === id && t.status !== "SUCCESS"));
  if (!live) fail(`no stage was seen before it succeeded (was the deployment already over?): ${await history()}`);

  const nav = await page.evaluate(() => ({
    navigations: performance.getEntriesByType("navigation").length,
    marker: window.__gannetMarker,
  }));
  if (nav.navigations !== 1 || nav.marker !== "still the same page") {
    fail(`the page reloaded while the deployment ran (${JSON.stringify(nav)})`);
  }
  await screenshot(page, "deployment.png");
  console.log(`stages-in-order: ${expected.join(", ")} succeeded in order: ${await history()}`);
}

/** approve: an approver clicks Approve; the waiting stage and the deployment succeed. */
export async function approve(browser) {
  const page = await newPage(browser);
  await openSignedIn(page, deploymentPath());
  const button = page.getByTestId("approve");
  await waitFor("the approve button", () => button.isVisible(), {
    detail: async () => `stages: ${JSON.stringify(await stageStatuses(page))}; ${await alerts(page)}`,
  });
  if ((await button.count()) !== 1) fail(`expected one approve button, found ${await button.count()}`);
  const row = page.locator('li[data-testid^="stage-"]', { has: button });
  const stage = await row.getAttribute("data-testid");
  await button.click();
  await waitFor(
    `${stage} to become SUCCESS after approving`,
    async () => (await page.getAttribute(`[data-testid="${stage}"]`, "data-status")) === "SUCCESS",
    { detail: async () => `stages: ${JSON.stringify(await stageStatuses(page))}; ${await alerts(page)}` },
  );
  await waitFor(
    "the deployment to reach SUCCESS",
    async () => {
      await failIfEnded(page);
      return (await deploymentStatus(page)) === "SUCCESS";
    },
    { detail: async () => `deployment status ${await deploymentStatus(page)}` },
  );
  if ((await page.getByTestId("approve").count()) !== 0) fail("the approve button is still shown after success");
  console.log(`approve: ${stage.slice("stage-".length)} approved; the deployment succeeded`);
}

/** Fails naming every control of CONTROLS (or any button saying so) on the page. */
async function assertNoControls(page, where) {
  const found = [];
  for (const id of CONTROLS) {
    const n = await page.getByTestId(id).count();
    if (n) found.push(`${n} [data-testid=${id}]`);
  }
  // Whole words: a stage summed up as "approvers: alice" or "approved by bob" is no control.
  const named = await page.getByRole("button", { name: /\b(approve|cancel|sync|pause|resume|roll ?back)\b/i }).count();
  if (named) found.push(`${named} button(s) named approve/cancel/sync/pause/resume/rollback`);
  if (found.length) fail(`a viewer's ${where} shows controls: ${found.join(", ")}`);
}

/** viewer-no-approve: a viewer sees the waiting stage but no approve, cancel or sync control. */
export async function viewerNoApprove(browser) {
  const page = await newPage(browser);
  await openSignedIn(page, deploymentPath());
  const who = await page.getByTestId("caller").innerText();
  if (!who.includes("(viewer)")) fail(`expected to be signed in as a viewer, the header says ${who}`);
  const waiting = page.locator('li[data-name="WAIT_APPROVAL"][data-status="RUNNING"]');
  await waitFor("a WAIT_APPROVAL stage waiting for approval", () => waiting.first().isVisible(), {
    detail: async () => `stages: ${JSON.stringify(await stageStatuses(page))}; ${await alerts(page)}`,
  });
  const text = await waiting.first().innerText();
  if (!/waiting for approval/i.test(text)) fail(`the waiting stage does not say so: ${text}`);
  // Give the page another poll round to render anything it would add.
  await page.waitForTimeout(1500);
  await assertNoControls(page, "deployment page");

  await page.goto(url(`/apps/${encodeURIComponent(env("GANNET_APP"))}`));
  await waitFor("the app page with its deployments", async () => {
    const loaded = await page.getByTestId("app-status").isVisible();
    const history = (await page.getByTestId("deployments").count()) + (await page.getByText("No deployments yet").count());
    return loaded && history > 0;
  }, { detail: () => alerts(page) });
  await page.waitForTimeout(1000);
  await assertNoControls(page, "app page");
  console.log("viewer-no-approve: the waiting stage is shown; no approve, cancel, sync, pause, resume or rollback control");
}

/** failing-stage-log: the failed stage's log shows GANNET_EXPECT.line without a click. */
export async function failingStageLog(browser) {
  const line = expectation().line;
  if (!line) fail("GANNET_EXPECT.line must give the log text to find");
  const page = await newPage(browser);
  await openSignedIn(page, deploymentPath());
  await waitFor("the deployment to show FAILURE", async () => (await deploymentStatus(page)) === "FAILURE", {
    detail: async () => `deployment status ${await deploymentStatus(page)}; ${await alerts(page)}`,
  });
  const failed = page.locator('li[data-testid^="stage-"][data-status="FAILURE"]').first();
  await waitFor("a stage with status FAILURE", () => failed.isVisible(), {
    detail: async () => `stages: ${JSON.stringify(await stageStatuses(page))}`,
  });
  const stage = (await failed.getAttribute("data-testid")).slice("stage-".length);
  const pane = page.getByTestId(`log-${stage}`);
  await waitFor(
    `the log of failed stage ${stage} to show a line containing ${JSON.stringify(line)}`,
    async () => (await pane.isVisible()) && (await pane.innerText()).includes(line),
    {
      detail: async () =>
        `log pane ${(await pane.count()) ? `shows: ${JSON.stringify((await pane.innerText()).slice(-300))}` : "is not there"}`,
    },
  );
  console.log(`failing-stage-log: stage ${stage}'s log shows ${JSON.stringify(line)} without a click`);
}

/**
 * screenshots: every page at 1280x800 and at 390x844 (the deployment page's picture kept),
 * without errors; at 390 px no page scrolls sideways and the lists read as cards.
 */
export async function screenshots(browser) {
  const page = await newPage(browser);
  const errors = watchErrors(page);
  const app = encodeURIComponent(env("GANNET_APP"));
  await openSignedIn(page, "/apps");
  const pages = [
    ["/apps", "table[data-testid=apps], .empty", "apps.png"],
    [`/apps/${app}`, "[data-testid=app-page] [data-testid=deployments], [data-testid=app-page] .empty", "app.png"],
    ["/deployments", "table[data-testid=deployments], .empty", "deployments.png"],
    [deploymentPath(), 'li[data-testid^="stage-"], [data-testid=deployment-page] .empty', "deployment.png"],
  ];
  for (const [path, ready, file] of pages) {
    const res = await visit(page, path, ready);
    const csp = res && (await res.headerValue("content-security-policy"));
    if (!csp) fail(`${path} was served without a Content-Security-Policy header`);
    await screenshot(page, file);
  }
  await page.setViewportSize(PHONE);
  for (const [path, ready] of pages) {
    await visit(page, path, ready);
    await assertFits(page, path, PHONE.width);
  }
  await screenshot(page, "deployment-phone.png");
  if (errors.length) fail(`the console reported errors:\n  ${errors.join("\n  ")}`);
  console.log("screenshots: 4 pages at 1280x800 and 390x844, no console error or CSP violation");
}

/**
 * render-speed: from navigation start until all stages are shown and the expanded log shows
 * its last line. GANNET_EXPECT: {runs, stages (count), last_line, stage (id to open, optional:
 * by default the page's own choice)}. Prints {"ms": N} per run, then the median as
 * {"ms": MEDIAN, "median": true, "runs": [...]} on the last line.
 */
export async function renderSpeed(browser) {
  const want = expectation();
  const runs = Number(want.runs ?? 5);
  const stages = Number(want.stages ?? 1);
  if (!want.last_line) fail("GANNET_EXPECT.last_line must give the log's last line");
  const token = env("GANNET_TOKEN");
  const path = deploymentPath() + (want.stage ? `?stage=${encodeURIComponent(want.stage)}` : "");
  const times = [];
  for (let i = 0; i < runs; i++) {
    const context = await browser.newContext({ viewport: LAPTOP });
    // Signed in as the form would leave it, so the clock measures the page, not typing.
    await context.addInitScript((t) => sessionStorage.setItem("gannet.token", t), token);
    const page = await context.newPage();
    await page.goto(url(path));
    const handle = await page
      .waitForFunction(
        ({ stages, last, stage }) => {
          if (document.querySelectorAll('li[data-testid^="stage-"]').length < stages) return false;
          const panes = stage
            ? [document.querySelector(`[data-testid="log-${stage}"]`)]
            : [...document.querySelectorAll('[data-testid^="log-"]')];
          const done = panes.some((p) => p && p.offsetParent !== null && p.textContent.trimEnd().endsWith(last));
          return done && performance.now();
        },
        { stages, last: want.last_line, stage: want.stage ?? null },
        { polling: "raf", timeout: timeoutMs() },
      )
      .catch(async () =>
        fail(
          `timed out waiting for ${stages} stages and a log ending ${JSON.stringify(want.last_line)}; ` +
            `stages: ${JSON.stringify(await stageStatuses(page))}; ${await alerts(page)}`,
        ),
      );
    const ms = Math.round(await handle.jsonValue());
    times.push(ms);
    console.log(JSON.stringify({ ms, run: i + 1 }));
    await context.close();
  }
  printMedian(times);
}

/** Prints the runs' median as the last line: {"ms": MEDIAN, "median": true, "runs": [...]}. */
function printMedian(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid] : Math.round((sorted[mid - 1] + sorted[mid]) / 2);
  console.log(JSON.stringify({ ms: median, median: true, runs: times }));
}

/**
 * render-static: the benchmark's peer. The same stages and log as one static HTML page (no
 * script, no API), from a file: from navigation start until its <pre> shows the last line.
 * GANNET_EXPECT: {runs, file (absolute path), last_line}. Prints as render-speed does.
 */
export async function renderStatic(browser) {
  const want = expectation();
  const runs = Number(want.runs ?? 5);
  if (!want.file || !want.last_line) fail("GANNET_EXPECT needs file and last_line");
  const times = [];
  for (let i = 0; i < runs; i++) {
    const context = await browser.newContext({ viewport: LAPTOP });
    const page = await context.newPage();
    await page.goto(`file://${want.file}`);
    const handle = await page.waitForFunction(
      (last) => {
        const pre = document.querySelector("pre");
        return pre && pre.offsetParent !== null && pre.textContent.trimEnd().endsWith(last) && performance.now();
      },
      want.last_line,
      { polling: "raf", timeout: timeoutMs() },
    );
    const ms = Math.round(await handle.jsonValue());
    times.push(ms);
    console.log(JSON.stringify({ ms, run: i + 1 }));
    await context.close();
  }
  printMedian(times);
}

/** Presses Tab until `isTarget(arg)` (run in the page) holds; at most 60 presses. */
async function tabTo(page, what, isTarget, arg) {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate(isTarget, arg)) return;
  }
  fail(`Tab never reached ${what}`);
}

/** Every form field has a label and every button or link a name a screen reader can say. */
async function unnamedControls(page) {
  return page.$$eval("input, select, textarea, button, a[href]", (els) =>
    els
      .filter((el) => {
        const aria = (el.getAttribute("aria-label") || "").trim() || el.getAttribute("aria-labelledby");
        if (["INPUT", "SELECT", "TEXTAREA"].includes(el.tagName)) return !aria && !(el.labels && el.labels.length);
        return !aria && !el.textContent.trim();
      })
      .map((el) => el.outerHTML.slice(0, 120)),
  );
}

/**
 * keyboard: with the keyboard alone, sign in (Tab to the labelled token field, type, Enter),
 * then on the deployment page Tab to a stage and open its log with Enter and close it with
 * Space. On every page, every field is labelled and every control named.
 */
export async function keyboard(browser) {
  const page = await newPage(browser);
  await page.goto(url(deploymentPath()));
  await tabTo(page, "the API token field", () => document.activeElement?.labels?.[0]?.textContent === "API token");
  await page.keyboard.type(env("GANNET_TOKEN"));
  await page.keyboard.press("Enter");
  await waitFor("the header to show who is signed in", () => page.getByTestId("caller").isVisible(), {
    detail: () => alerts(page),
  });
  await waitFor("the deployment's stages", async () => (await stageStatuses(page)).length > 0);
  const stage = expectation().stage;
  if (!stage) fail("GANNET_EXPECT.stage must name a stage whose log to open");
  const pane = page.getByTestId(`log-${stage}`);
  await tabTo(page, `stage ${stage}'s header`, (id) => {
    const el = document.activeElement;
    return el?.tagName === "BUTTON" && el.closest(`[data-testid="stage-${id}"]`) !== null;
  }, stage);
  const expanded = () => page.evaluate(() => document.activeElement.getAttribute("aria-expanded"));
  if ((await expanded()) === "true") await page.keyboard.press("Space");
  await page.keyboard.press("Enter");
  await waitFor(`stage ${stage}'s log to open with Enter`, async () => (await expanded()) === "true" && pane.isVisible());
  await page.keyboard.press("Space");
  await waitFor(`stage ${stage}'s log to close with Space`, async () => (await expanded()) === "false");
  for (const path of ["/apps", `/apps/${encodeURIComponent(env("GANNET_APP"))}`, "/deployments", deploymentPath()]) {
    await page.goto(url(path));
    await waitFor(`${path} to render`, () => page.locator("main h1").first().isVisible());
    const unnamed = await unnamedControls(page);
    if (unnamed.length) fail(`${path} has controls without a label or name: ${unnamed.join(" | ")}`);
  }
  console.log(`keyboard: signed in and opened and closed stage ${stage}'s log with the keyboard; every control named`);
}

/**
 * pending-why: a PENDING deployment's page says why it waits and links the deployment it waits
 * for (GANNET_EXPECT.blocked_by), which opens in the same page.
 */
export async function pendingWhy(browser) {
  const blocker = expectation().blocked_by;
  if (!blocker) fail("GANNET_EXPECT.blocked_by must name the deployment it waits for");
  const page = await newPage(browser);
  await openSignedIn(page, deploymentPath());
  const banner = page.locator(".banner-wait");
  await waitFor("the waiting banner", () => banner.isVisible(), { detail: () => alerts(page) });
  const text = await banner.innerText();
  if (!text.includes("Waiting to start")) fail(`the banner says: ${text}`);
  const link = banner.locator(`a[href="/deployments/${encodeURIComponent(blocker)}"]`);
  if ((await link.count()) !== 1) fail(`no link to ${blocker} in: ${text}`);
  await link.click();
  await waitFor(`the page of ${blocker}`, async () => page.url().endsWith(`/deployments/${encodeURIComponent(blocker)}`) && (await stageStatuses(page)).length > 0);
  console.log(`pending-why: "${text.replace(/\s+/g, " ").trim()}"`);
}

/**
 * stage-details: stage GANNET_EXPECT.stage, opened on the deployment page, shows each resource
 * of GANNET_EXPECT.resources ({address, actions, text}) as its plugin presented it: one row per
 * resource, its actions, and `text` (an attribute's change) in the row.
 */
export async function stageDetails(browser) {
  const { stage, resources } = expectation();
  if (!stage || !Array.isArray(resources) || resources.length === 0) {
    fail("GANNET_EXPECT must give stage and resources");
  }
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, deploymentPath());
  const row = page.getByTestId(`stage-${stage}`);
  await waitFor(`stage ${stage} to show`, () => row.isVisible(), { detail: () => alerts(page) });
  const head = row.locator("button.stage-head");
  if ((await head.getAttribute("aria-expanded")) !== "true") await head.click();
  const block = row.getByTestId("detail-resources");
  await waitFor(`stage ${stage}'s resources to show`, () => block.isVisible(), {
    detail: async () => `stage body: ${JSON.stringify(await row.innerText())}`,
  });
  const shown = block.getByTestId("resource");
  const count = await shown.count();
  if (count !== resources.length) {
    fail(`stage ${stage} shows ${count} resources, expected ${resources.length}: ${JSON.stringify(await block.innerText())}`);
  }
  for (const want of resources) {
    const item = block.locator(`[data-testid="resource"][data-address="${want.address}"]`);
    if ((await item.count()) !== 1) fail(`no resource ${want.address} in: ${JSON.stringify(await block.innerText())}`);
    const actions = await item.getAttribute("data-actions");
    if (actions !== want.actions.join(",")) fail(`${want.address}: actions ${actions}, expected ${want.actions}`);
    const text = await item.innerText();
    if (want.text && !text.includes(want.text)) fail(`${want.address} shows ${JSON.stringify(text)}, not ${JSON.stringify(want.text)}`);
  }
  await screenshot(page, "stage-details.png");
  if (errors.length > 0) fail(`the page reported errors: ${errors.join("; ")}`);
  console.log(`stage-details: stage ${stage} shows ${count} resources: ${JSON.stringify(await block.innerText())}`);
}

/**
 * stage-tables: for each entry of GANNET_EXPECT.stages ({stage, table, rows}), stage `stage`,
 * opened on the deployment page, shows a table named `table` (its caption) holding exactly
 * `rows`: each row an object of column heading → cell text, matched on the columns it names
 * (the first one it names picks the row). Other columns and tables are not looked at.
 */
export async function stageTables(browser) {
  const { stages } = expectation();
  if (!Array.isArray(stages) || stages.length === 0) fail("GANNET_EXPECT.stages must list {stage, table, rows}");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, deploymentPath());
  const seen = [];
  for (const { stage, table: title, rows } of stages) {
    if (!stage || !title || !Array.isArray(rows) || rows.length === 0) {
      fail(`GANNET_EXPECT.stages: ${JSON.stringify({ stage, table: title })} needs stage, table and rows`);
    }
    const row = page.getByTestId(`stage-${stage}`);
    await waitFor(`stage ${stage} to show`, () => row.isVisible(), { detail: () => alerts(page) });
    const head = row.locator("button.stage-head");
    if ((await head.getAttribute("aria-expanded")) !== "true") await head.click();
    const table = row.getByRole("table", { name: title, exact: true });
    await waitFor(`stage ${stage}'s table ${JSON.stringify(title)} to show`, () => table.isVisible(), {
      detail: async () => `stage body: ${JSON.stringify(await row.innerText())}`,
    });
    const shown = await table.evaluate((t) => ({
      columns: t.tHead ? [...t.tHead.rows].flatMap((r) => [...r.cells].map((c) => c.innerText.trim())) : [],
      rows: [...t.tBodies].flatMap((b) => [...b.rows].map((r) => [...r.cells].map((c) => c.innerText.trim()))),
    }));
    const what = `stage ${stage}'s table ${JSON.stringify(title)} (${JSON.stringify(shown)})`;
    if (shown.rows.length !== rows.length) fail(`${what} shows ${shown.rows.length} rows, expected ${rows.length}`);
    for (const want of rows) {
      const named = Object.keys(want);
      if (named.length === 0) fail(`GANNET_EXPECT: an empty row for stage ${stage}`);
      const at = Object.fromEntries(named.map((c) => [c, shown.columns.indexOf(c)]));
      const missing = named.filter((c) => at[c] < 0);
      if (missing.length > 0) fail(`${what} has no column ${missing.join(", ")}`);
      const key = named[0];
      const found = shown.rows.filter((r) => r[at[key]] === want[key]);
      if (found.length !== 1) fail(`${what}: ${found.length} rows with ${key} ${JSON.stringify(want[key])}, expected 1`);
      for (const c of named) {
        const got = found[0][at[c]];
        if (got !== want[c]) {
          fail(`${what}: ${key} ${JSON.stringify(want[key])} shows ${c} ${JSON.stringify(got)}, expected ${JSON.stringify(want[c])}`);
        }
      }
    }
    seen.push(`${stage}: ${shown.rows.map((r) => r.join(" ")).join("; ")}`);
  }
  await screenshot(page, "stage-tables.png");
  if (errors.length > 0) fail(`the page reported errors: ${errors.join("; ")}`);
  console.log(`stage-tables: ${seen.join(" | ")}`);
}
