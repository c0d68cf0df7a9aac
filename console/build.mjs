// Builds the console into DIR: index.html, app.js, app.css and favicon.svg, nothing else.
//
//   node build.mjs --out DIR
//
// esbuild bundles src/main.tsx (Preact, the CSS it imports) minified for ES2020, with no
// source maps and no absolute paths, so the same sources give byte-identical files. Prints
// nothing on stdout (scripts/console.sh calls it); errors go to stderr.

import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
const SRC = join(HERE, "src");

/** Builds into `out`; returns the written files' names. */
export async function build(out) {
  const result = await esbuild.build({
    absWorkingDir: HERE,
    entryPoints: { app: join(SRC, "main.tsx") },
    bundle: true,
    minify: true,
    target: "es2020",
    format: "esm",
    platform: "browser",
    jsx: "automatic",
    jsxImportSource: "preact",
    sourcemap: false,
    legalComments: "none",
    charset: "utf8",
    write: false,
    outdir: "out",
    logLevel: "silent",
  });
  const files = new Map();
  for (const f of result.outputFiles) {
    const name = f.path.slice(f.path.lastIndexOf("/") + 1);
    if (name !== "app.js" && name !== "app.css") throw new Error(`unexpected esbuild output ${name}`);
    files.set(name, f.contents);
  }
  if (files.size !== 2) throw new Error("esbuild did not produce app.js and app.css");
  for (const name of ["index.html", "favicon.svg"]) files.set(name, await readFile(join(SRC, name)));
  await mkdir(out, { recursive: true });
  // The stamp scripts/console.sh writes once the bundle is whole and type-checked: a bundle
  // built here alone (dev.mjs) is not one the Rust build takes.
  await rm(join(out, ".sources.sha256"), { force: true });
  for (const [name, contents] of files) await writeFile(join(out, name), contents);
  return [...files.keys()];
}

function usage() {
  process.stderr.write("usage: node build.mjs --out DIR\n");
  process.exit(2);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args.length !== 2 || args[0] !== "--out") usage();
  build(resolve(args[1])).catch((e) => {
    for (const m of e.errors ?? []) {
      const at = m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ` : "";
      process.stderr.write(`build.mjs: ${at}${m.text}\n`);
    }
    if (!e.errors) process.stderr.write(`build.mjs: ${e.message}\n`);
    process.exit(1);
  });
}
