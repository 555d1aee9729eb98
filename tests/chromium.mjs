// Debian's headless Chromium driven by playwright-core (no browser download): the one launcher of
// the browser tests. chromiumPath() is null when it is not installed (the tests then skip).
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CANDIDATES = [process.env.CHROMIUM, "/usr/bin/chromium", "/usr/bin/chromium-browser"];

export function chromiumPath() {
  return CANDIDATES.find((p) => p && existsSync(p)) ?? null;
}

// A fresh profile per launch, no network beyond what the page asks of 127.0.0.1.
export async function launchChromium() {
  const { chromium } = await import("playwright-core");
  const profile = mkdtempSync(join(tmpdir(), "inferlab-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath(),
    headless: true,
    viewport: { width: 1100, height: 900 },
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  const close = async () => {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}
