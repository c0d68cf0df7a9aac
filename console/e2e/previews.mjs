// The plan preview pages: a preview's apps and details as the API has them, and the list.

import { alerts, env, expectation, fail, newPage, openSignedIn, screenshot, waitFor, watchErrors } from "./lib.mjs";

/**
 * preview: the page of plan preview GANNET_DEPLOYMENT (the path a check run's details_url
 * names) shows GANNET_EXPECT.status and .result, each app's result (GANNET_EXPECT.apps:
 * {name: result}), app GANNET_APP's details holding GANNET_EXPECT.details in a <pre> with
 * whether it read with credentials (GANNET_EXPECT.credentials), raises no console error, and
 * the Previews page (from the nav) lists it with its result.
 */
export async function preview(browser) {
  const want = expectation();
  if (!want.status || !want.result || !want.apps) fail("GANNET_EXPECT must give status, result and apps");
  const id = env("GANNET_DEPLOYMENT");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, `/previews/${encodeURIComponent(id)}`);
  const status = page.locator('[data-testid="preview-status"]');
  await waitFor(`the preview to read ${want.status}`, async () => (await status.getAttribute("data-status").catch(() => null)) === want.status, {
    detail: () => alerts(page),
  });
  const result = await page.locator('[data-testid="preview-result"]').getAttribute("data-result");
  if (result !== want.result) fail(`the result reads ${result}, not ${want.result}`);
  const apps = await page
    .locator('[data-testid="preview-app"]')
    .evaluateAll((els) => Object.fromEntries(els.map((e) => [e.dataset.app, e.dataset.result])));
  if (JSON.stringify(apps) !== JSON.stringify(want.apps)) fail(`apps read ${JSON.stringify(apps)}, not ${JSON.stringify(want.apps)}`);
  const section = page.locator(`[data-testid="preview-app-details"][data-app="${env("GANNET_APP")}"]`);
  const details = await section.locator('pre[data-testid="app-details"]').innerText();
  if (want.details && !details.includes(want.details)) fail(`the details do not hold "${want.details}": ${details.slice(0, 300)}`);
  const read = await section.locator('[data-testid="app-credentials"]').getAttribute("data-read");
  if (want.credentials !== undefined && read !== String(want.credentials)) fail(`credentials read ${read}, not ${want.credentials}`);
  await screenshot(page, "preview.png");
  await page.locator('nav[aria-label="Main"] a[href="/previews"]').click();
  const row = page.locator(`[data-testid="preview-row"][data-result="${want.result}"] a[href="/previews/${id}"]`);
  await waitFor("the previews list to show it", async () => (await row.count()) > 0, { detail: () => alerts(page) });
  await screenshot(page, "previews.png");
  if (errors.length > 0) fail(errors.join("; "));
  console.log(`preview: ${want.status} ${result}; apps ${JSON.stringify(apps)}`);
}
