// Where the Lambda's code comes from when the caller does not pass `code`.

import * as fs from 'node:fs';
import * as path from 'node:path';
import * as lambda from 'aws-cdk-lib/aws-lambda';

/**
 * The arm64 Lambda zip the published package carries (`make dist` puts it in `infra/assets/`
 * before packing; it holds `bootstrap` for `provided.al2023`).
 */
export const BUNDLED_CODE_ZIP = path.resolve(__dirname, '..', 'assets', 'ttl-sweeper-lambda-arm64.zip');

/**
 * The directory `make package` writes the arm64 `bootstrap` to, relative to this package: the
 * package sits in `infra/` of the repository, the build output in `target/lambda/` beside it.
 */
export const DEFAULT_CODE_DIRECTORY = path.resolve(__dirname, '..', '..', 'target', 'lambda', 'ttl-sweeper-lambda');

/**
 * The code used without `code`: the zip bundled in the package when there is one (an installed
 * package), else the `make package` output of the repository this package sits in.
 */
export function defaultCode(bundledZip: string = BUNDLED_CODE_ZIP, directory: string = DEFAULT_CODE_DIRECTORY): lambda.Code {
  if (fs.existsSync(bundledZip)) {
    return lambda.Code.fromAsset(bundledZip);
  }
  return codeFromBuildOutput(directory);
}

/** `Code.fromAsset(directory)`, after checking that the directory holds a `bootstrap`. */
export function codeFromBuildOutput(directory: string): lambda.Code {
  const bootstrap = path.join(directory, 'bootstrap');
  if (!fs.existsSync(directory) || !fs.statSync(directory).isDirectory()) {
    throw new Error(
      `TtlSweeper: no Lambda code at ${directory}. Run \`make package\` in the ttl-sweeper ` +
        'repository to build it, or pass `code` (e.g. lambda.Code.fromAsset(<directory holding the ' +
        'arm64 bootstrap>) or Code.fromBucket(...))',
    );
  }
  if (!fs.existsSync(bootstrap)) {
    throw new Error(
      `TtlSweeper: ${directory} has no \`bootstrap\`. Run \`make package\` in the ttl-sweeper ` +
        'repository to build it, or pass `code`',
    );
  }
  return lambda.Code.fromAsset(directory);
}
