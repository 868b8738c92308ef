"""Checks infra/container's manifests against their schemas, offline:
- the ECS task definition against botocore's model of RegisterTaskDefinition (the AWS CLI's own
  parameter validation: unknown keys, wrong types, missing required members);
- the Kubernetes manifest against the Kubernetes 1.37 OpenAPI schemas (kubernetes-validate,
  strict: unknown fields are errors).
Prints one line per manifest; exits 1 with the errors."""
import json
import pathlib
import subprocess
import sys

import botocore.session
from botocore.validate import ParamValidator

root = pathlib.Path(__file__).resolve().parent.parent
container = root / "infra" / "container"
failed = False

task = json.loads((container / "ecs-task-definition.json").read_text())
model = botocore.session.get_session().get_service_model("ecs")
shape = model.operation_model("RegisterTaskDefinition").input_shape
report = ParamValidator().validate(task, shape)
if report.has_errors():
    print(f"ecs-task-definition.json: {report.generate_report()}", file=sys.stderr)
    failed = True
else:
    print("ecs-task-definition.json: valid RegisterTaskDefinition input (botocore's ECS model)")

validate = pathlib.Path(sys.executable).parent / "kubernetes-validate"
result = subprocess.run(
    [str(validate), "--strict", "--quiet", "-k", "1.37.0", str(container / "kubernetes.yaml")],
    capture_output=True, text=True,
)
if result.returncode != 0:
    print(f"kubernetes.yaml: {result.stdout}{result.stderr}", file=sys.stderr)
    failed = True
else:
    print("kubernetes.yaml: valid against Kubernetes 1.37's schemas (kubernetes-validate --strict)")
sys.exit(1 if failed else 0)
