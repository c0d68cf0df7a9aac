/**
 * Synthesises the Gannet construct once per parity case: `node build/parity/synth.js
 * CASES_JSON OUT_DIR` writes OUT_DIR/<case>.json, the stack template made from the case's
 * `cdk` props (with placeholder zips for the code). compare_templates.py compares each with the SAM
 * template evaluated for the case's `sam` parameters.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { FunctionCode, Gannet, GannetProps } from '../src';
import { placeholderZips } from '../test/fixtures';

interface ParityCase {
  readonly sam: Record<string, unknown>;
  readonly cdk: Omit<GannetProps, 'code'>;
}

function main(casesPath: string, outDir: string): void {
  const cases: Record<string, ParityCase> = JSON.parse(fs.readFileSync(casesPath, 'utf8')).cases;
  const code = FunctionCode.fromZipDirectory(placeholderZips());
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, parityCase] of Object.entries(cases)) {
    const app = new App({
      outdir: fs.mkdtempSync(path.join(os.tmpdir(), `gannet-cdk-${name}-`)),
      // The parity tool maps resources back to SAM's logical ids by their construct paths.
      context: { 'aws:cdk:enable-path-metadata': true },
    });
    const stack = new Stack(app, 'gannet');
    new Gannet(stack, 'Gannet', { ...parityCase.cdk, code });
    const template = app.synth().getStackByName(stack.stackName).template;
    fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify(template, null, 1) + '\n');
  }
}

const [casesPath, outDir] = process.argv.slice(2);
if (casesPath === undefined || outDir === undefined) {
  process.stderr.write('usage: node build/parity/synth.js CASES_JSON OUT_DIR\n');
  process.exit(2);
}
main(casesPath, outDir);
