// Every test file in one process: aws-cdk-lib, cdk-nag and the construct load once, not once a
// file (`npm test`, and scripts/peer-test.sh on the lowest aws-cdk-lib).
import { readdirSync } from 'node:fs';

for (const file of readdirSync(__dirname).filter((f) => f.endsWith('.test.ts')).sort()) {
  require(`./${file}`);
}
