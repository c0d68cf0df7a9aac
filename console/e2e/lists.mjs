// Browser-test scenarios about the list pages: the deployments list a page at a time under
// day headings, rollbacks marked, and every list readable on a 390 px wide phone.

import {
  alerts,
  appPath,
  assertFits,
  deploymentPath,
  env,
  expectation,
  fail,
  newPage,
  openSignedIn,
  PHONE,
  screenshot,
  url,
  visit,
  waitFor,
  watchErrors,
} from "./lib.mjs";

const DAY_MS = 86_400_000;

/** The deployment ids of the table's rows, in page order. */
function rowIds(page) {
  return page.$$eval("table[data-testid=deployments] tr[data-deployment]", (rows) => rows.map((r) => r.dataset.deployment));
}

/** The day headings of the deployments table, in page order. */
function days(page) {
  return page.$$eval("[data-testid=deployments-day]", (bodies) => bodies.map((b) => b.dataset.day));
}

/** Waits until the table shows exactly `ids`, in that order. */
async function showsRows(page, ids, what) {
  await waitFor(`${what} to list ${ids.map((i) => i.slice(0, 10)).join(", ")}`, async () => JSON.stringify(await rowIds(page)) === JSON.stringify(ids), {
    detail: async () => `it lists ${JSON.stringify(await rowIds(page))} at ${page.url()}; ${await alerts(page)}`,
  });
}

/** Fails unless the row of `id` (on the page now) is marked a rollback of `of`. */
async function markedRollback(page, id, of, where) {
  const mark = page.locator(`tr[data-deployment="${id}"] [data-testid=rollback-of]`);
  if ((await mark.count()) !== 1) fail(`${where}: the row of ${id} is not marked a rollback`);
  const text = (await mark.innerText()).trim();
  if ((await mark.getAttribute("data-of")) !== of || text !== `rollback of ${of.slice(0, 10)}`) {
    fail(`${where}: the row of ${id} says ${JSON.stringify(text)}, expected a rollback of ${of}`);
  }
  const link = mark.locator(`a[href="/deployments/${encodeURIComponent(of)}"]`);
  if ((await link.count()) !== 1) fail(`${where}: the rollback mark does not link ${of}`);
}

/**
 * deployments-list: /deployments?limit=GANNET_EXPECT.limit shows GANNET_EXPECT.ids (every
 * deployment, newest first) `limit` at a time: "Older" walks to the last page (which has no
 * "Older"), "Newer" walks back to the first (which has no "Newer"), each page under the heading
 * "Today". With the browser's clock a day later the same rows are under "Yesterday", two days
 * later under the weekday and date. The row of GANNET_EXPECT.rollback.id says "rollback of"
 * GANNET_EXPECT.rollback.of, here and in GANNET_APP's history.
 */
export async function deploymentsList(browser) {
  const { limit, ids, rollback } = expectation();
  if (!limit || !Array.isArray(ids) || ids.length <= limit) fail("GANNET_EXPECT needs limit and more ids than limit");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, `/deployments?limit=${limit}`);
  const pages = [];
  for (let i = 0; i < ids.length; i += limit) pages.push(ids.slice(i, i + limit));
  const seen = [];
  for (let n = 0; n < pages.length; n++) {
    await showsRows(page, pages[n], `page ${n + 1}`);
    const headings = await days(page);
    if (JSON.stringify(headings) !== JSON.stringify(["Today"])) fail(`page ${n + 1} is headed ${JSON.stringify(headings)}, expected ["Today"]`);
    if (rollback && pages[n].includes(rollback.id)) await markedRollback(page, rollback.id, rollback.of, `page ${n + 1}`);
    const newer = await page.getByTestId("newer").count();
    if ((n === 0) !== (newer === 0)) fail(`page ${n + 1} ${newer ? "offers" : "does not offer"} newer deployments`);
    const older = page.getByTestId("older");
    if (n === pages.length - 1) {
      if (await older.count()) fail(`the last page (${n + 1}) offers older deployments`);
    } else {
      await older.click();
      const before = new URL(page.url()).searchParams.get("before");
      if (before !== pages[n][pages[n].length - 1]) fail(`"Older" went to ${page.url()}, expected before=${pages[n].at(-1)}`);
    }
    seen.push(`page ${n + 1}: ${pages[n].length} rows`);
  }
  for (let n = pages.length - 2; n >= 0; n--) {
    const newer = page.getByTestId("newer");
    if ((await newer.innerText()).trim() !== "← Newer") fail(`the link back says ${JSON.stringify(await newer.innerText())}`);
    await newer.click();
    await showsRows(page, pages[n], `page ${n + 1}, back with "Newer"`);
  }
  if (await page.getByTestId("newer").count()) fail("back on the first page, it still offers newer deployments");

  if (rollback) {
    await page.goto(url(appPath()));
    await waitFor("the app's history", async () => (await rowIds(page)).includes(rollback.id), { detail: () => alerts(page) });
    await markedRollback(page, rollback.id, rollback.of, "the app's history");
  }
  await screenshot(page, "deployments.png");

  // The same rows seen from tomorrow, then from the day after.
  for (const [later, heading] of [
    [DAY_MS, /^Yesterday$/],
    [2 * DAY_MS, /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d{2}-\d{2}$/],
  ]) {
    const tomorrow = await newPage(browser);
    await tomorrow.clock.setFixedTime(new Date(Date.now() + later));
    await openSignedIn(tomorrow, `/deployments?limit=${limit}`);
    await showsRows(tomorrow, pages[0], `page 1 seen ${later / DAY_MS} day(s) later`);
    const headings = await days(tomorrow);
    if (headings.length !== 1 || !heading.test(headings[0])) {
      fail(`${later / DAY_MS} day(s) later, page 1 is headed ${JSON.stringify(headings)}, expected ${heading}`);
    }
    seen.push(`${later / DAY_MS} day(s) later: ${headings[0]}`);
    await tomorrow.context().close();
  }
  if (errors.length) fail(`the console reported errors: ${errors.join("; ")}`);
  console.log(`deployments-list: ${ids.length} deployments, ${limit} a page: ${seen.join("; ")}`);
}

/**
 * narrow: at 390x844, the apps list, the deployments list, GANNET_APP's page and (when given)
 * GANNET_DEPLOYMENT's page do not scroll sideways (document.documentElement.scrollWidth <=
 * 390), and every row of the lists lies inside the viewport.
 */
export async function narrow(browser) {
  const page = await newPage(browser, PHONE);
  const errors = watchErrors(page);
  await openSignedIn(page, "/apps");
  const checked = [];
  const pages = [
    ["/apps", "table[data-testid=apps] tbody tr", "apps-phone.png"],
    ["/deployments", "table[data-testid=deployments] tbody tr[data-deployment]", "deployments-phone.png"],
    [appPath(), "[data-testid=app-page] [data-testid=deployments]", "app-phone.png"],
  ];
  if (env("GANNET_DEPLOYMENT", { required: false })) pages.push([deploymentPath(), 'li[data-testid^="stage-"]', "deployment-phone.png"]);
  for (const [path, ready, file] of pages) {
    await visit(page, path, ready);
    const rows = await assertFits(page, path, PHONE.width);
    await screenshot(page, file);
    checked.push(`${path} (${rows} rows)`);
  }
  if (errors.length) fail(`the console reported errors: ${errors.join("; ")}`);
  console.log(`narrow: at ${PHONE.width}px nothing scrolls sideways: ${checked.join(", ")}`);
}
