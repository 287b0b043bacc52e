// Run by `npm install` (postinstall): applies the guard of src/platform/db/postgres-patch.ts to the
// installed postgres.js (pinned in package.json to the exact version the patch matches). The
// patch is idempotent and checks that it applied; the service refuses to start without it.
import { applyPostgresPatch } from "./postgres-patch.ts"

applyPostgresPatch()
