// Browser-test scenarios about one deployment's page: opened by a short id, its stages' key
// options and approvers, and the tools of a stage's log (times, search, download, stderr).

import { readFile } from "node:fs/promises";
import {
  alerts,
  deploymentPath,
  env,
  expectation,
  fail,
  newPage,
  openSignedIn,
  screenshot,
  stageStatuses,
  waitFor,
  watchErrors,
} from "./lib.mjs";

/**
 * short-id: /deployments/GANNET_DEPLOYMENT (a prefix of the id, as the console and the CLI
 * print it) opens deployment GANNET_EXPECT.id: its full id shown, its stages listed; with
 * ?stage=GANNET_EXPECT.stage that stage's log opens too; with GANNET_EXPECT.commit_url, its
 * commit links there.
 */
export async function shortId(browser) {
  const { id, stage } = expectation();
  const short = env("GANNET_DEPLOYMENT");
  if (!id || !stage || !id.startsWith(short) || id === short) fail("GANNET_EXPECT needs id (which GANNET_DEPLOYMENT abbreviates) and stage");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, `${deploymentPath()}?stage=${encodeURIComponent(stage)}`);
  const full = page.locator("dl.facts dt:text-is('ID') + dd");
  await waitFor(`the page of ${short} to show deployment ${id}`, async () => (await full.count()) === 1 && (await full.innerText()).trim() === id, {
    detail: async () => `the page shows ${JSON.stringify((await page.locator("main").innerText()).slice(0, 300))}`,
  });
  await waitFor("its stages", async () => (await stageStatuses(page)).length > 0);
  const pane = page.getByTestId(`log-${stage}`);
  await waitFor(`stage ${stage}'s log, opened from the URL`, async () => (await pane.count()) === 1 && (await pane.isVisible()), {
    detail: async () => `stages: ${JSON.stringify(await stageStatuses(page))}`,
  });
  const { commit_url: link } = expectation();
  if (link) {
    const href = await page.getByTestId("commit-link").getAttribute("href").catch(() => null);
    if (href !== link) fail(`the commit links ${JSON.stringify(href)}, expected ${link}`);
  }
  if (errors.length) fail(`the console reported errors: ${errors.join("; ")}`);
  console.log(`short-id: /deployments/${short} shows ${id} with ${(await stageStatuses(page)).length} stages and ${stage}'s log`);
}

/**
 * stage-summaries: each stage of GANNET_EXPECT.stages ({stage, summary, approved_by}) shows on
 * its row, unopened, its key option `summary` and "approved by" `approved_by` (joined with ", "),
 * or no such mark when that is empty.
 */
export async function stageSummaries(browser) {
  const { stages } = expectation();
  if (!Array.isArray(stages) || stages.length === 0) fail("GANNET_EXPECT.stages must list {stage, summary, approved_by}");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, deploymentPath());
  const seen = [];
  for (const want of stages) {
    const head = page.locator(`[data-testid="stage-${want.stage}"] .stage-row`);
    await waitFor(`stage ${want.stage}'s row`, () => head.isVisible(), { detail: () => alerts(page) });
    const summary = head.getByTestId("stage-summary");
    const shownSummary = (await summary.count()) ? (await summary.innerText()).trim() : "";
    if (shownSummary !== (want.summary ?? "")) fail(`stage ${want.stage} shows the summary ${JSON.stringify(shownSummary)}, expected ${JSON.stringify(want.summary)}`);
    const approved = head.getByTestId("stage-approved-by");
    const shownApproved = (await approved.count()) ? (await approved.innerText()).trim() : "";
    const wantApproved = (want.approved_by ?? []).length ? `approved by ${want.approved_by.join(", ")}` : "";
    if (shownApproved !== wantApproved) fail(`stage ${want.stage} says ${JSON.stringify(shownApproved)}, expected ${JSON.stringify(wantApproved)}`);
    seen.push(`${want.stage}: ${[shownSummary, shownApproved].filter(Boolean).join(", ") || "(nothing)"}`);
  }
  await screenshot(page, "stages.png");
  if (errors.length) fail(`the console reported errors: ${errors.join("; ")}`);
  console.log(`stage-summaries: ${seen.join(" | ")}`);
}

const TIME = /^\d{2}:\d{2}:\d{2}\.\d{3} /;

/**
 * log-tools: stage GANNET_EXPECT.stage's log (GANNET_EXPECT.lines, every line in order) on the
 * deployment page:
 * - the lines of GANNET_EXPECT.stderr are marked as standard error, and no other line is;
 * - "Timestamps" puts each line's time before it, and takes them away again;
 * - a search for GANNET_EXPECT.search keeps exactly the lines holding it (any case), each
 *   match highlighted, and says how many; clearing it brings every line back;
 * - Download saves the whole log as a .txt file, line for line.
 */
export async function logTools(browser) {
  const { stage, lines, stderr, search } = expectation();
  if (!stage || !Array.isArray(lines) || !Array.isArray(stderr) || !search) fail("GANNET_EXPECT needs stage, lines, stderr and search");
  const page = await newPage(browser);
  const errors = watchErrors(page);
  await openSignedIn(page, `${deploymentPath()}?stage=${encodeURIComponent(stage)}`);
  const pane = page.getByTestId(`log-${stage}`);
  const text = async () => (await pane.innerText()).replace(/\n$/, "").split("\n");
  await waitFor(`stage ${stage}'s log to show its ${lines.length} lines`, async () => (await pane.isVisible()) && JSON.stringify(await text()) === JSON.stringify(lines), {
    detail: async () => `it shows ${JSON.stringify(await text())}`,
  });

  const marked = await pane.evaluate((el) =>
    [...el.querySelectorAll(".log-stderr")].flatMap((s) => s.textContent.replace(/\n$/, "").split("\n")),
  );
  if (JSON.stringify(marked) !== JSON.stringify(stderr)) fail(`the lines marked as standard error are ${JSON.stringify(marked)}, expected ${JSON.stringify(stderr)}`);

  const tools = page.getByTestId(`log-tools-${stage}`);
  const toggle = tools.getByLabel("Timestamps");
  await toggle.check();
  await waitFor("every line to show its time", async () => {
    const shown = await text();
    return shown.length === lines.length && shown.every((l, i) => TIME.test(l) && l.replace(TIME, "") === lines[i]);
  }, { detail: async () => `it shows ${JSON.stringify(await text())}` });
  const timed = await text();
  await toggle.uncheck();
  await waitFor("the times to go", async () => JSON.stringify(await text()) === JSON.stringify(lines), {
    detail: async () => `it shows ${JSON.stringify(await text())}`,
  });

  const box = tools.getByRole("searchbox", { name: "Search" });
  const holding = lines.filter((l) => l.toLowerCase().includes(search.toLowerCase()));
  if (holding.length === 0 || holding.length === lines.length) fail("GANNET_EXPECT.search must match some lines, not all");
  await box.fill(search.toUpperCase());
  await waitFor(`only the ${holding.length} lines holding ${JSON.stringify(search)}`, async () => JSON.stringify(await text()) === JSON.stringify(holding), {
    detail: async () => `it shows ${JSON.stringify(await text())}`,
  });
  const marks = await pane.locator("mark").allInnerTexts();
  if (marks.length < holding.length || marks.some((m) => m.toLowerCase() !== search.toLowerCase())) {
    fail(`the matches highlighted are ${JSON.stringify(marks)}`);
  }
  const count = (await tools.getByTestId("log-count").innerText()).trim();
  if (count !== `${holding.length} of ${lines.length} lines`) fail(`the search says ${JSON.stringify(count)}`);
  await screenshot(page, "log-search.png");
  await box.fill("");
  await waitFor("every line back", async () => JSON.stringify(await text()) === JSON.stringify(lines), {
    detail: async () => `it shows ${JSON.stringify(await text())}`,
  });

  const [download] = await Promise.all([page.waitForEvent("download"), tools.getByRole("button", { name: "Download" }).click()]);
  const name = download.suggestedFilename();
  if (!name.endsWith(".txt")) fail(`the log downloads as ${name}, not a .txt file`);
  const saved = await readFile(await download.path(), "utf8");
  if (saved !== lines.join("\n") + "\n") fail(`the downloaded log holds ${JSON.stringify(saved)}`);
  if (errors.length) fail(`the console reported errors: ${errors.join("; ")}`);
  console.log(`log-tools: ${lines.length} lines, ${stderr.length} marked stderr; times like ${JSON.stringify(timed[0])}; "${search}" kept ${holding.length}; downloaded ${name}`);
}
