// A development server for the console (Node's http module only): builds the bundle, serves
// it as gannet will (index.html for the page routes, /assets/*, the same CSP), and proxies
// /api/* and /healthz to a running `gannet up`.
//
//   node dev.mjs --api http://127.0.0.1:7070 [--port 5180] [--dir DIR] [--role ROLE [--name NAME]]
//
// --dir serves an already built bundle instead of building into console/dist.
// --role: when the server has no /api/v1/whoami yet (it answers 404), answer it here with
// this role (viewer, deployer, approver or admin) for any token. Development only: the real
// server derives the role from the token.

import { readFile } from "node:fs/promises";
import http from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "./build.mjs";

// Keep in step with the Rust server's header for the console.
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const TYPES = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
  "favicon.svg": "image/svg+xml",
};
const PAGE = /^\/(apps(\/[^/]+)?|deployments(\/[^/]+)?)?\/?$/;
const ROLES = {
  viewer: { read: true, deploy: false, approve: false },
  deployer: { read: true, deploy: true, approve: false },
  approver: { read: true, deploy: false, approve: true },
  admin: { read: true, deploy: true, approve: true },
};

const { values: opt } = parseArgs({
  options: {
    api: { type: "string" },
    port: { type: "string", default: "5180" },
    dir: { type: "string" },
    role: { type: "string" },
    name: { type: "string", default: "dev" },
  },
});
if (!opt.api) {
  process.stderr.write("usage: node dev.mjs --api http://127.0.0.1:PORT [--port N] [--dir DIR] [--role ROLE]\n");
  process.exit(2);
}
if (opt.role && !ROLES[opt.role]) {
  process.stderr.write(`dev.mjs: --role must be one of ${Object.keys(ROLES).join(", ")}\n`);
  process.exit(2);
}
const upstream = new URL(opt.api);
const dir = opt.dir ?? join(dirname(fileURLToPath(import.meta.url)), "dist");
if (!opt.dir) await build(dir);

function send(res, status, type, body, extra = {}) {
  res.writeHead(status, {
    "Content-Type": type,
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    ...extra,
  });
  res.end(body);
}

const json = (res, status, value) => send(res, status, "application/json", JSON.stringify(value));

async function serveFile(res, name) {
  try {
    send(res, 200, TYPES[name], await readFile(join(dir, name)));
  } catch {
    json(res, 404, { error: "no such file" });
  }
}

function whoami(req, res) {
  if (!/^bearer\s+\S/i.test(req.headers.authorization ?? "")) {
    return json(res, 401, { error: "no token (dev.mjs)" });
  }
  json(res, 200, { caller: { name: opt.name, role: opt.role }, may: ROLES[opt.role] });
}

function proxy(req, res) {
  const headers = { ...req.headers, host: upstream.host };
  // The page's own origin stands for the server's: gannet refuses changes from other origins.
  if (headers.origin === `http://${req.headers.host}`) headers.origin = upstream.origin;
  const out = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
    (up) => {
      if (opt.role && up.statusCode === 404 && req.url.split("?")[0] === "/api/v1/whoami") {
        up.resume();
        return whoami(req, res);
      }
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    },
  );
  out.on("error", () => {
    if (!res.headersSent) json(res, 502, { error: "gannet is not answering (dev.mjs proxy)" });
    else res.destroy();
  });
  req.pipe(out);
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? "/").split("?")[0];
  if (path.startsWith("/api/") || path === "/healthz") return proxy(req, res);
  if (req.method !== "GET" && req.method !== "HEAD") return json(res, 405, { error: "method not allowed" });
  if (path.startsWith("/assets/")) {
    const name = path.slice("/assets/".length);
    return TYPES[name] && name !== "index.html" ? serveFile(res, name) : json(res, 404, { error: "no such file" });
  }
  if (PAGE.test(path)) return serveFile(res, "index.html");
  json(res, 404, { error: "no such route" });
});

server.listen(Number(opt.port), "127.0.0.1", () => {
  const { port } = server.address();
  process.stderr.write(`dev.mjs: http://127.0.0.1:${port}/ (API: ${upstream.origin})\n`);
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => server.close(() => process.exit(0)));
