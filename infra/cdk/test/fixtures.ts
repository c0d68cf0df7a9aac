import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FUNCTION_NAMES } from '../src';

/** An empty zip archive (just its end-of-central-directory record). */
const EMPTY_ZIP = Buffer.from([0x50, 0x4b, 0x05, 0x06, ...new Array(18).fill(0)]);

/**
 * A directory laid out like `cargo lambda build --output-format zip --lambda-dir DIR`
 * (DIR/<binary>/bootstrap.zip) holding empty zips: tests never build Rust.
 */
export function placeholderZips(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gannet-cdk-zips-'));
  for (const name of FUNCTION_NAMES) {
    fs.mkdirSync(path.join(dir, name));
    fs.writeFileSync(path.join(dir, name, 'bootstrap.zip'), EMPTY_ZIP);
  }
  return dir;
}
