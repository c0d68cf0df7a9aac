// Runs one browser-test scenario against a running gannet (its console and API).
//
//   GANNET_CHROMIUM=/path/to/chromium GANNET_URL=http://127.0.0.1:7070 GANNET_TOKEN=... \
//     node e2e/run.mjs SCENARIO
//
// Scenarios: stages-in-order, approve, viewer-no-approve, failing-stage-log, screenshots, keyboard,
// pending-why, stage-details, stage-tables, render-speed, render-static (scenarios.mjs);
// app-status, sync-diff (apps.mjs); deployments-list, narrow (lists.mjs); short-id,
// stage-summaries, log-tools (deployment.mjs); chain (chains.mjs); preview (previews.mjs). Other
// variables: GANNET_DEPLOYMENT, GANNET_APP,
// GANNET_SCREENSHOTS (a directory for PNGs), GANNET_EXPECT (JSON, per scenario). Exits 0 when
// the scenario's assertions hold; otherwise prints why on stderr and exits 1 (2: bad usage).

import { chromium } from "playwright-core";
import { env, Failure } from "./lib.mjs";
import * as apps from "./apps.mjs";
import * as chains from "./chains.mjs";
import * as deployment from "./deployment.mjs";
import * as lists from "./lists.mjs";
import * as previews from "./previews.mjs";
import * as scenarios from "./scenarios.mjs";

const BY_NAME = {
  "stages-in-order": scenarios.stagesInOrder,
  approve: scenarios.approve,
  "viewer-no-approve": scenarios.viewerNoApprove,
  "failing-stage-log": scenarios.failingStageLog,
  screenshots: scenarios.screenshots,
  "render-speed": scenarios.renderSpeed,
  "render-static": scenarios.renderStatic,
  keyboard: scenarios.keyboard,
  "pending-why": scenarios.pendingWhy,
  "stage-details": scenarios.stageDetails,
  "stage-tables": scenarios.stageTables,
  "app-status": apps.appStatus,
  "sync-diff": apps.syncDiff,
  "deployments-list": lists.deploymentsList,
  narrow: lists.narrow,
  "short-id": deployment.shortId,
  "stage-summaries": deployment.stageSummaries,
  "log-tools": deployment.logTools,
  chain: chains.chain,
  preview: previews.preview,
};

const name = process.argv[2];
const scenario = BY_NAME[name];
if (!scenario || process.argv.length !== 3) {
  process.stderr.write(`usage: node e2e/run.mjs SCENARIO\nscenarios: ${Object.keys(BY_NAME).join(", ")}\n`);
  process.exit(2);
}

let browser;
let code = 0;
try {
  browser = await chromium.launch({ executablePath: env("GANNET_CHROMIUM"), headless: true });
  await scenario(browser);
} catch (e) {
  code = 1;
  const message = e instanceof Failure ? e.message : e.stack ?? String(e);
  process.stderr.write(`${name}: FAILED: ${message}\n`);
} finally {
  await browser?.close().catch(() => {});
}
process.exit(code);
