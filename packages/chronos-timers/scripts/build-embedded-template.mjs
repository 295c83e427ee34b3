// Run by `npm run build` after the compiler: writes the embedded store's migrated template,
// dist/embedded/pgdata-template.tar.gz, and its stamp (src/store/driver/embedded-template.ts says why).
import { buildTemplate, TEMPLATE_FILE } from '../dist/store/driver/embedded-template.js';

await buildTemplate(TEMPLATE_FILE);
