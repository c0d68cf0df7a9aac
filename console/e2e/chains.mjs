// The deployment chain pages: a chain's blocks and apps as the API has them, and the list.

import { alerts, env, expectation, fail, newPage, openSignedIn, screenshot, waitFor, watchErrors } from "./lib.mjs";

/**
 * chain: the page of the chain GANNET_DEPLOYMENT started (a deployment id opens its chain)
 * shows GANNET_EXPECT.status with a reason holding GANNET_EXPECT.reason, each block's status
 * (GANNET_EXPECT.blocks, in order) and each app's (GANNET_EXPECT.nodes: {app: status}), links
 * each deployment, raises no console error, and the chains list shows it.
 */
export async function chain(browser) {
  const want = expectation();
  if (!want.status || !Array.isArray(want.blocks)) fail("GANNET_EXPECT must give status and blocks");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, `/chains/${encodeURIComponent(env("GANNET_DEPLOYMENT"))}`);
  const status = page.locator('[data-testid="chain-status"]');
  await waitFor(`the chain to read ${want.status}`, async () => (await status.getAttribute("data-status").catch(() => null)) === want.status, {
    detail: () => alerts(page),
  });
  const reason = await page.locator('[data-testid="chain-reason"]').innerText();
  if (want.reason && !reason.includes(want.reason)) fail(`the reason reads "${reason}", not "${want.reason}"`);
  const blocks = await page.locator('[data-testid="chain-block"]').evaluateAll((els) => els.map((e) => e.dataset.status));
  if (JSON.stringify(blocks) !== JSON.stringify(want.blocks)) fail(`blocks read ${JSON.stringify(blocks)}, not ${JSON.stringify(want.blocks)}`);
  const nodes = await page
    .locator('[data-testid="chain-node"]')
    .evaluateAll((els) => Object.fromEntries(els.map((e) => [e.dataset.app, e.dataset.status])));
  for (const [app, s] of Object.entries(want.nodes ?? {})) {
    if (nodes[app] !== s) fail(`app ${app} reads ${nodes[app]}, not ${s} (all: ${JSON.stringify(nodes)})`);
  }
  const links = await page.locator('[data-testid="chain-node"] a[href^="/deployments/"]').count();
  if (links < 1) fail("no app links its deployment");
  if ((await page.locator('[data-testid="cancel-chain"]').count()) !== 0) fail("an ended chain offers Cancel");
  await screenshot(page, "chain.png");
  await page.locator('nav[aria-label="Main"] a[href="/chains"]').click();
  const row = page.locator(`[data-testid="chain-row"][data-status="${want.status}"]`);
  await waitFor("the chains list to show it", async () => (await row.count()) > 0, { detail: () => alerts(page) });
  await screenshot(page, "chains.png");
  if (errors.length > 0) fail(errors.join("; "));
  console.log(`chain: ${want.status}: ${reason}; blocks ${blocks.join(", ")}`);
}
