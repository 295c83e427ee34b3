/** The package's own name and version, read from its package.json wherever it is installed. */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
};

export const PACKAGE_NAME = pkg.name;
export const VERSION = pkg.version;
