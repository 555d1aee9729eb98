// llama.cpp as the speed peer, through node-llama-cpp's prebuilt CPU binaries (npm, pinned in
// package.json). Shared by llama_cpp_bench.mjs and llama_cpp_greedy.mjs.
import fs from "node:fs";

// Exit status when node-llama-cpp is not installed, so callers can say "peer absent" rather than fail.
export const EXIT_PEER_ABSENT = 3;

export function fail(message, code = 1) {
  process.stderr.write(`${process.argv[1].split("/").pop()}: ${message}\n`);
  process.exit(code);
}

export async function importNodeLlamaCpp() {
  try {
    return await import("node-llama-cpp");
  } catch (e) {
    if (e.code === "ERR_MODULE_NOT_FOUND")
      fail("node-llama-cpp is not installed (run scripts/setup, or `npm ci --omit=optional` in the repo root)",
           EXIT_PEER_ABSENT);
    throw e;
  }
}

// The prebuilt CPU backend only: never download or compile llama.cpp, never look for a GPU.
export async function loadLlama(nlc) {
  process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
  try {
    return await nlc.getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false,
                               logLevel: nlc.LlamaLogLevel.error});
  } catch (e) {
    fail(`node-llama-cpp could not load its prebuilt llama.cpp CPU binaries: ${e.message}`, EXIT_PEER_ABSENT);
  }
}

// ggml loads one CPU backend variant per machine (zen4, icelake, haswell, ...): report which.
export function loadedCpuBackend() {
  const maps = fs.readFileSync("/proc/self/maps", "utf8");
  const found = new Set([...maps.matchAll(/libggml-cpu-([\w-]+)\.so/g)].map((m) => m[1]));
  return [...found].join(",") || "unknown";
}

export async function loadModel(llama, path) {
  if (!fs.existsSync(path)) fail(`${path}: no such GGUF file`);
  try {
    return await llama.loadModel({modelPath: path, gpuLayers: 0, useMmap: true});
  } catch (e) {
    fail(`llama.cpp could not load ${path}: ${e.message}`);
  }
}

export function parseArgs(argv, spec) {
  const args = {...spec.defaults};
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "-h" || flag === "--help") {
      process.stdout.write(spec.usage + "\n");
      process.exit(0);
    }
    const name = spec.flags[flag];
    if (name === undefined) {
      if (!flag.startsWith("-") && args.model === undefined) { args.model = flag; continue; }
      fail(`unknown argument '${flag}'\n${spec.usage}`, 2);
    }
    if (typeof args[name] === "boolean") { args[name] = true; continue; }
    if (i + 1 >= argv.length) fail(`${flag} needs a value`, 2);
    args[name] = argv[++i];
  }
  if (args.model === undefined) fail(`missing the GGUF file\n${spec.usage}`, 2);
  return args;
}

export function positiveInt(value, flag, {allowZero = false} = {}) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < (allowZero ? 0 : 1)) fail(`${flag} must be an integer >= ${allowZero ? 0 : 1} (got '${value}')`, 2);
  return n;
}
