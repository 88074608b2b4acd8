// The generated stubs of ctxd.v1 that the Inspector uses are the TypeScript client's
// (clients/typescript/src/gen, made from proto/ by clients/typescript/buf.gen.yaml). Bundled here,
// their imports of packages (@bufbuild/protobuf) resolve from the Inspector's node_modules, not
// the client's: one copy of the runtime, at the Inspector's pin, whether or not clients/typescript
// has its own node_modules. (tsconfig.json's `paths` do the same for tsc.)
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";

const inspector = dirname(fileURLToPath(import.meta.url));
export const stubs = join(inspector, "..", "clients", "typescript", "src", "gen");

/** esbuild plugin: bare imports from the stubs resolve as if made from inspector/. */
export const stubsImportFromInspector = {
  name: "stubs-import-from-inspector",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      args.importer.startsWith(stubs + sep)
        ? build.resolve(args.path, { kind: args.kind, resolveDir: inspector })
        : undefined,
    );
  },
};
