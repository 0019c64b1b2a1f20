// Measures the built component's throughput inside wasm (V8 via jco), on the corpora the native
// throughput test writes. Usage, from plugins/pii-filter:
//   PII_FILTER_CORPUS_DIR=/tmp/piibench cargo test -p pii-filter --release throughput -- --ignored
//   npx @bytecodealliance/jco transpile ../../target/plugins/wasm32-wasip2/release/pii_filter.wasm \
//       --instantiation async -o /tmp/piibench/component
//   node bench/wasm-throughput.mjs /tmp/piibench <jco install>/node_modules
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2] ?? "/tmp/piibench";
// Where jco is installed (its node_modules), for the WASI shim.
const modules = process.argv[3] ?? "node_modules";
const { instantiate } = await import(pathToFileURL(join(dir, "component", "pii_filter.js")));
const shimPath = createRequire(join(modules, "..", "x.js")).resolve("@bytecodealliance/preview2-shim");
const shim = await import(pathToFileURL(shimPath));
const getCoreModule = (name) => WebAssembly.compile(readFileSync(join(dir, "component", name)));
const camel = (s) => s.replace(/-(.)/g, (_, c) => c.toUpperCase());
// Import names carry versions (`wasi:cli/stdout@0.2.6`); resolve them without.
const imports = new Proxy(
  {},
  {
    get(_, key) {
      const [pkg, iface] = String(key).split("@")[0].split("/");
      if (pkg === "railyard:policy") return iface === "host" ? { log: () => {} } : {};
      return shim[pkg.split(":")[1]][camel(iface)];
    },
  },
);
const c = await instantiate(getCoreModule, imports);
const plugin = c.plugin ?? c["railyard:policy/plugin@0.1.0"];
plugin.configure("{}");
for (const name of ["dense", "sparse"]) {
  const text = readFileSync(join(dir, `${name}.txt`), "utf8");
  const request = {
    rail: "input",
    messages: [{ role: "user", content: { tag: "text", val: text }, toolCalls: [] }],
    tools: [],
    context: { requestId: "bench", metadata: [] },
  };
  plugin.evaluate(request); // warm up
  const reps = 20;
  const t0 = process.hrtime.bigint();
  let verdict;
  for (let i = 0; i < reps; i++) verdict = plugin.evaluate(request);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const mb = (Buffer.byteLength(text) * reps) / 1e6;
  console.log(`${name}: ${(mb / reps).toFixed(2)} MB, verdict ${verdict.tag}; evaluate ${(mb / secs).toFixed(0)} MB/s (wasm, V8)`);
}
