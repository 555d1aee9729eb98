// deploy/kubernetes offline (issue 18): the Deployment, Service and ConfigMap validated against the
// Kubernetes API schemas packaged by npm `kubernetes-models` (a broken copy must fail, so the check
// can fail); the InferencePool checked by hand (no schema for it is packaged) against the
// Deployment; and the probe paths and the endpoint picker's metric names checked on a live
// `inferlab serve`. Never applied to a cluster.
//   node kubernetes_test.mjs CLI MODEL
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { Service } from "kubernetes-models/v1/Service";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const [cli, model] = process.argv.slice(2);
let failed = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed++;
};
const load = (file) => parseAllDocuments(readFileSync(join(root, "deploy/kubernetes", file), "utf8")).map((d) => d.toJS());
const models = { Deployment, Service, ConfigMap };
const valid = (doc) => {
  try {
    new models[doc.kind](doc).validate();
    return "";
  } catch (e) {
    return String(e.message || e).slice(0, 300);
  }
};

const docs = [...load("inferlab.yaml"), ...load("inference-pool.yaml")];
const byKind = Object.fromEntries(docs.map((d) => [d.kind, d]));
for (const doc of docs.filter((d) => models[d.kind])) {
  const error = valid(doc);
  check(error === "", `${doc.kind} ${doc.metadata.name}: valid against the Kubernetes schema ${error}`);
}
const broken = structuredClone(byKind.Deployment);
broken.spec.template.spec.containers[0].ports[0].containerPort = "eight thousand";
delete broken.spec.selector;
check(valid(broken) !== "", "a broken Deployment (port not a number, no selector) is refused by the same check");

const dep = byKind.Deployment;
const container = dep.spec.template.spec.containers[0];
const pool = byKind.InferencePool;
check(pool?.apiVersion === "inference.networking.k8s.io/v1", "InferencePool: inference.networking.k8s.io/v1");
check(JSON.stringify(pool.spec.selector.matchLabels) === JSON.stringify(dep.spec.template.metadata.labels),
  "InferencePool selects the Deployment's pods");
check(pool.spec.targetPorts[0].number === container.ports[0].containerPort, "InferencePool targets the container port");
check(byKind.Service.spec.selector.app === dep.spec.template.metadata.labels.app, "the Service selects the Deployment's pods");
check(container.readinessProbe.httpGet.path === "/ready" && container.livenessProbe.httpGet.path === "/health",
  "readiness on /ready, liveness on /health");

// A live server with the Deployment's flags (on loopback, any port): the probes answer 200 and
// every metric the endpoint picker is pointed at (and the vLLM defaults) is in /metrics.
const args = container.args.filter((a, i, all) => !["--host", "--port"].includes(a) && !["--host", "--port"].includes(all[i - 1]));
const server = spawn(cli, ["serve", model, "--port", "0", "--threads", "1", ...args], { stdio: ["ignore", "pipe", "pipe"] });
let log = "";
server.stdout.on("data", (d) => (log += d));
server.stderr.on("data", (d) => (log += d));
try {
  let base = "";
  for (let i = 0; i < 600 && !base; i++) {
    const m = log.match(/listening on (http:\/\/[^\s]+)/);
    if (m) base = m[1].replace("0.0.0.0", "127.0.0.1");
    else await new Promise((r) => setTimeout(r, 100));
  }
  let ready = 0;
  for (let i = 0; i < 600 && ready !== 200; i++) {
    ready = await fetch(base + "/ready").then((r) => r.status, () => 0);
    if (ready !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  const health = await fetch(base + "/health").then((r) => r.status);
  check(ready === 200 && health === 200, `the probes answer on a server started with the Deployment's flags (${ready}, ${health})`);
  const metrics = await fetch(base + "/metrics").then((r) => r.text());
  const names = [...byKind.ConfigMap.data.flags.matchAll(/--[a-z-]+-metric=(\S+)/g)].map((m) => m[1]);
  names.push("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info");
  for (const name of names) check(new RegExp(`^${name.replace(/[.:]/g, "\\$&")}[ {]`, "m").test(metrics), `/metrics has ${name}`);
} finally {
  server.kill("SIGTERM");
}
if (failed) {
  console.log(`${failed} kubernetes checks failed`);
  process.exit(1);
}
console.log("kubernetes: all checks passed");
