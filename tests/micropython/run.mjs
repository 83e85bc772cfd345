// Runs a MicroPython script on the real MicroPython WebAssembly port, with powerrig's firmware
// package (firmware/powerrig_fw) and test vectors mounted into its filesystem.
//   node run.mjs SCRIPT.py [ARG...]    exit 0 on success, 1 on a Python exception
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const script = process.argv[2];
if (!script) { console.error("usage: node run.mjs SCRIPT.py"); process.exit(2); }

const out = [];
const mp = await loadMicroPython({
  heapsize: 4 * 1024 * 1024,
  stdout: (s) => process.stdout.write(s + "\n"),
  stderr: (s) => process.stderr.write(s + "\n"),
});

function mount(src, dst) {
  mp.FS.mkdirTree(dst);
  for (const name of fs.readdirSync(src)) {
    const p = path.join(src, name);
    if (fs.statSync(p).isDirectory()) { if (name !== "__pycache__") mount(p, dst + "/" + name); }
    else if (name.endsWith(".py") || name.endsWith(".json") || name.endsWith(".bin") || name.endsWith(".hex")) {
      mp.FS.writeFile(dst + "/" + name, fs.readFileSync(p));
    }
  }
}
mount(path.join(repo, "firmware", "powerrig_fw"), "/lib/powerrig_fw");
mount(path.join(repo, "tests", "vectors"), "/vectors");
mp.FS.mkdirTree("/tmp");

const args = JSON.stringify(process.argv.slice(3));
try {
  mp.runPython(`import sys\nsys.path.insert(0, '/lib')\nsys.path.append('/vectors')\nARGS = ${args}\n`);
  mp.runPython(fs.readFileSync(script, "utf8"));
} catch (e) {
  if (e.name === "PythonError") { console.error(e.message); process.exit(1); }
  throw e;
}
