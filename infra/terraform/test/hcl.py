"""Terraform configuration read with python-hcl2's parser, and a small evaluator of its
expressions, offline: enough of Terraform's language to work out what the module in
infra/terraform creates for given inputs (which resources exist, their arguments, the policy
documents) without `terraform init`, which needs a provider registry.

What Terraform only knows once it has applied (an ARN, a URL) evaluates to a `Placeholder`: the
string "{{<resource address>.<attribute>}}". A validation whose condition meets one is not
decided (as Terraform defers it until the value is known).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from hcl2.api import parses_to_tree
from lark import Token, Tree


class EvalError(Exception):
    """An expression Terraform would refuse, or one this evaluator does not know."""


class UnknownValue(Exception):
    """An operation on a value known only after apply (a validation then is not decided)."""


class Placeholder(str):
    """A value known only after apply, as "{{<address>.<attribute>}}", or text holding one."""


# ---------------------------------------------------------------- reading


@dataclass
class Block:
    """A block: its type, labels, attributes (expression trees, in order) and nested blocks."""

    type: str
    labels: list[str]
    attrs: dict[str, Tree]
    blocks: list["Block"]
    file: str
    line: int
    source: str = field(repr=False)

    def blocks_of(self, kind: str) -> list["Block"]:
        return [b for b in self.blocks if b.type == kind]

    def block(self, kind: str) -> "Block":
        found = self.blocks_of(kind)
        if len(found) != 1:
            raise EvalError(f"{self.file}:{self.line}: expected one {kind} block, found {len(found)}")
        return found[0]

    def text(self, name: str) -> str:
        """The source text of attribute `name`'s expression."""
        tree = self.attrs[name]
        return self.source[tree.meta.start_pos : tree.meta.end_pos]


def _identifier(tree: Tree) -> str:
    """An identifier (or a keyword or literal used as a name), or a quoted label."""
    if tree.data == "string":
        return "".join(_string_text(p) for p in tree.children if isinstance(p, Tree))
    token = tree.children[0]
    return str(token)


def _string_text(part: Tree) -> str:
    child = part.children[0]
    if isinstance(child, Token):
        return _unescape(str(child))
    raise EvalError("a block label must be a plain string")


def _body(body: Tree, file: str, source: str) -> tuple[dict[str, Tree], list[Block]]:
    attrs: dict[str, Tree] = {}
    blocks: list[Block] = []
    for child in body.children:
        if not isinstance(child, Tree):
            continue
        if child.data == "attribute":
            name = _identifier(child.children[0])
            expression = child.children[-1]
            if name in attrs:
                raise EvalError(f"{file}:{child.meta.line}: attribute {name} given twice")
            attrs[name] = expression
        elif child.data == "block":
            parts = [c for c in child.children if isinstance(c, Tree)]
            header = [p for p in parts if p.data in ("identifier", "keyword", "literal_value", "string")]
            inner = next(p for p in parts if p.data == "body")
            kind, labels = _identifier(header[0]), [_identifier(h) for h in header[1:]]
            a, b = _body(inner, file, source)
            blocks.append(Block(kind, labels, a, b, file, child.meta.line, source))
    return attrs, blocks


def load_file(path: str) -> list[Block]:
    """The top-level blocks of one .tf file (parsed once: the blocks are not changed after)."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return list(_parse(path, source))


@functools.lru_cache(maxsize=None)
def _parse(path: str, source: str) -> tuple[Block, ...]:
    tree = parses_to_tree(source)
    attrs, blocks = _body(tree.children[0], path, source)
    if attrs:
        raise EvalError(f"{path}: attributes outside any block: {sorted(attrs)}")
    return tuple(blocks)


def load_dir(directory: str) -> list[Block]:
    """The top-level blocks of every .tf file of `directory` (not its subdirectories)."""
    blocks: list[Block] = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".tf"):
            blocks.extend(load_file(os.path.join(directory, name)))
    return blocks


# ---------------------------------------------------------------- walking expressions


def references(tree: Tree) -> list[list[str]]:
    """Every traversal of an expression: `var.x` as ["var", "x"], `aws_a.b[0].c` as
    ["aws_a", "b", "c"] (indexes left out), iterator and for-expression names included."""
    found: list[list[str]] = []

    def chain(node: Tree) -> list[str] | None:
        if node.data == "expr_term" and len(node.children) == 1 and isinstance(node.children[0], Tree):
            return chain(node.children[0])
        if node.data == "identifier":
            return [str(node.children[0])]
        if node.data == "get_attr_expr_term":
            head = chain(node.children[0])
            if head is None:
                return None
            return head + [_identifier(node.children[1].children[1])]
        if node.data in ("index_expr_term", "attr_splat_expr_term", "full_splat_expr_term"):
            return chain(node.children[0])
        return None

    def walk(node: Any) -> None:
        if not isinstance(node, Tree):
            return
        if node.data in ("get_attr_expr_term", "index_expr_term", "attr_splat_expr_term", "full_splat_expr_term"):
            c = chain(node)
            if c is not None:
                found.append(c)
                # Down the chain to its root: references inside indexes, and in a root that is
                # not a name (a call or a parenthesized expression, then indexed).
                cur = node
                while True:
                    if cur.data == "expr_term" and len(cur.children) == 1 and isinstance(cur.children[0], Tree):
                        cur = cur.children[0]
                    elif cur.data in ("get_attr_expr_term", "index_expr_term", "attr_splat_expr_term", "full_splat_expr_term"):
                        for child in cur.children[1:]:
                            walk(child)
                        cur = cur.children[0]
                    else:
                        break
                if cur.data != "identifier":
                    walk(cur)
                return
        if node.data == "function_call":
            # The function's name is not a reference.
            for child in node.children[1:]:
                walk(child)
            return
        if node.data == "object_elem_key":
            inner = node.children[0]
            # A bare key (`eventName = ...`) names an attribute, a parenthesized one is an expression.
            if isinstance(inner, Tree) and inner.data == "expr_term" and isinstance(inner.children[0], Tree) and inner.children[0].data == "identifier":
                return
        if node.data == "expr_term" and len(node.children) == 1 and isinstance(node.children[0], Tree) and node.children[0].data == "identifier":
            found.append([str(node.children[0].children[0])])
            return
        for child in node.children:
            walk(child)

    walk(tree)
    return found


# ---------------------------------------------------------------- values


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            n = text[i + 1]
            simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
            if n in simple:
                out.append(simple[n])
                i += 2
                continue
            if n == "u":
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            raise EvalError(f"unknown escape \\{n}")
        out.append(c)
        i += 1
    return "".join(out).replace("$${", "${").replace("%%{", "%{")


def is_unknown(value: Any) -> bool:
    if isinstance(value, Placeholder):
        return True
    if isinstance(value, list):
        return any(is_unknown(v) for v in value)
    if isinstance(value, dict):
        return any(is_unknown(v) for v in value.values())
    return False


def known(value: Any) -> Any:
    if is_unknown(value):
        raise UnknownValue(value)
    return value


def tf_string(value: Any) -> str:
    """A value as Terraform converts it to a string."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    if value is None:
        raise EvalError("a null value cannot be converted to a string")
    raise EvalError(f"cannot convert {value!r} to a string")


def tf_number(value: Any) -> float | int:
    if isinstance(value, bool) or value is None:
        raise EvalError(f"a number is required, got {value!r}")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        known(value)
        try:
            return int(value)
        except ValueError:
            return float(value)
    raise EvalError(f"a number is required, got {value!r}")


def tf_equal(a: Any, b: Any) -> bool:
    if is_unknown(a) or is_unknown(b):
        # A value known after apply is never null.
        if a is None or b is None:
            return False
        raise UnknownValue((a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, (int, float)) != isinstance(b, (int, float)):
        return False
    return a == b


def jsonencode(value: Any) -> str:
    """Terraform's jsonencode: keys sorted, no spaces, <, > and & escaped."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    text = json.dumps(clean(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Placeholder(text) if is_unknown(value) else text


def _regex(pattern: str) -> re.Pattern:
    # Terraform's RE2 and Python's re agree on the patterns the module uses.
    return re.compile(pattern)


# ---------------------------------------------------------------- evaluation


class Scope:
    """Where names are looked up: a configuration's variables, locals, resources and data, and
    the names a for expression or a dynamic block binds."""

    def __init__(self, config: "Configuration", names: dict[str, Any] | None = None):
        self.config = config
        self.names = names or {}

    def bind(self, **names: Any) -> "Scope":
        return Scope(self.config, {**self.names, **names})


FUNCTIONS: dict[str, Callable[..., Any]] = {}


def function(name: str):
    def register(f):
        FUNCTIONS[name] = f
        return f

    return register


@function("coalesce")
def _coalesce(*values):
    for v in values:
        if v is not None and v != "":
            return v
    raise EvalError("coalesce: no non-null, non-empty argument")


@function("substr")
def _substr(s, offset, length):
    s = known(s)
    offset, length = int(tf_number(offset)), int(tf_number(length))
    return s[offset:] if length == -1 else s[offset : offset + length]


@function("replace")
def _replace(s, old, new):
    if len(old) > 1 and old.startswith("/") and old.endswith("/"):
        return re.sub(old[1:-1], new.replace("$", "\\"), known(s))
    result = s.replace(old, new)
    return Placeholder(result) if isinstance(s, Placeholder) else result


@function("tostring")
def _tostring(v):
    return None if v is None else tf_string(v)


@function("tonumber")
def _tonumber(v):
    return None if v is None else tf_number(v)


@function("min")
def _min(*values):
    return min(tf_number(v) for v in values)


@function("max")
def _max(*values):
    return max(tf_number(v) for v in values)


@function("ceil")
def _ceil(v):
    return math.ceil(tf_number(v))


@function("floor")
def _floor(v):
    return math.floor(tf_number(v))


@function("regexall")
def _regexall(pattern, s):
    return [m.group(0) for m in _regex(pattern).finditer(known(s))]


@function("regex")
def _regex_fn(pattern, s):
    m = _regex(pattern).search(known(s))
    if m is None:
        raise EvalError(f"regex: {pattern!r} does not match {s!r}")
    return m.group(0) if not m.groups() else list(m.groups())


@function("trimspace")
def _trimspace(s):
    return known(s).strip()


@function("trimprefix")
def _trimprefix(s, prefix):
    return known(s)[len(prefix) :] if s.startswith(prefix) else s


@function("trimsuffix")
def _trimsuffix(s, suffix):
    return known(s)[: -len(suffix)] if suffix and s.endswith(suffix) else s


@function("startswith")
def _startswith(s, prefix):
    return known(s).startswith(prefix)


@function("endswith")
def _endswith(s, suffix):
    return known(s).endswith(suffix)


@function("join")
def _join(sep, items):
    result = sep.join(tf_string(i) for i in items)
    return Placeholder(result) if is_unknown(items) else result


@function("split")
def _split(sep, s):
    return known(s).split(sep)


@function("contains")
def _contains(items, value):
    return any(tf_equal(i, value) for i in known(items))


@function("length")
def _length(v):
    return len(known(v))


@function("compact")
def _compact(items):
    return [i for i in items if i is not None and i != ""]


@function("alltrue")
def _alltrue(items):
    return all(items)


@function("concat")
def _concat(*lists):
    return [x for l in lists for x in l]


@function("merge")
def _merge(*maps):
    out: dict = {}
    for m in maps:
        if m is not None:
            out.update(m)
    return out


@function("toset")
def _toset(items):
    out: list = []
    for i in items:
        if not any(tf_equal(i, o) for o in out):
            out.append(i)
    return out


@function("tomap")
def _tomap(m):
    return dict(m)


@function("tolist")
def _tolist(items):
    return list(items)


@function("one")
def _one(items):
    if len(items) > 1:
        raise EvalError("one: more than one element")
    return items[0] if items else None


@function("jsonencode")
def _jsonencode(v):
    return jsonencode(v)


@function("lower")
def _lower(s):
    return known(s).lower()


@function("upper")
def _upper(s):
    return known(s).upper()


class Configuration:
    """One module's configuration (a directory of .tf files) with values for its variables.

    `inputs` are the variables' values (the others take their defaults); `context` gives the data
    sources' values: `partition`, `region`, `account_id`. With `resolve_attributes`, a resource's
    attribute set in its block evaluates to that expression (an example's table name), and a
    required variable left unset is a Placeholder; otherwise every resource attribute is a
    Placeholder of its address (the module's own resources, as the drift test compares them with
    the construct's logical ids).
    """

    def __init__(
        self,
        directory: str,
        inputs: dict[str, Any] | None = None,
        context: dict[str, str] | None = None,
        resolve_attributes: bool = False,
        blocks: list[Block] | None = None,
    ):
        self.directory = directory
        self.blocks = blocks if blocks is not None else load_dir(directory)
        self.inputs = dict(inputs or {})
        self.context = context or {"partition": "aws", "region": "eu-west-1", "account_id": "123456789012"}
        self.resolve_attributes = resolve_attributes
        self.variables = {b.labels[0]: b for b in self.blocks if b.type == "variable"}
        self.outputs = {b.labels[0]: b for b in self.blocks if b.type == "output"}
        self.local_exprs: dict[str, Tree] = {}
        for b in self.blocks:
            if b.type == "locals":
                for k, v in b.attrs.items():
                    if k in self.local_exprs:
                        raise EvalError(f"local.{k} defined twice")
                    self.local_exprs[k] = v
        self.resources = {(b.labels[0], b.labels[1]): b for b in self.blocks if b.type == "resource"}
        self.data = {(b.labels[0], b.labels[1]): b for b in self.blocks if b.type == "data"}
        self.modules = {b.labels[0]: b for b in self.blocks if b.type == "module"}
        self.providers = [b for b in self.blocks if b.type == "provider"]
        unknown = set(self.inputs) - set(self.variables)
        if unknown:
            raise EvalError(f"{directory}: no variable {sorted(unknown)}")
        self._locals: dict[str, Any] = {}
        self._vars: dict[str, Any] = {}
        self._evaluating: set[str] = set()
        self.scope = Scope(self)

    # -- names

    def var(self, name: str) -> Any:
        if name not in self._vars:
            block = self.variables.get(name)
            if block is None:
                raise EvalError(f"no variable {name}")
            if name in self.inputs:
                value = self.inputs[name]
            elif "default" in block.attrs:
                value = self.eval(block.attrs["default"])
            elif self.resolve_attributes:
                # An example's required variable: what its user gives, unknown here.
                value = Placeholder("{{var." + name + "}}")
            else:
                raise EvalError(f"variable {name} is required and not given")
            if "type" in block.attrs and value is not None:
                value = convert(value, block.attrs["type"], self)
            self._vars[name] = value
        return self._vars[name]

    def local(self, name: str) -> Any:
        if name not in self._locals:
            if name not in self.local_exprs:
                raise EvalError(f"no local {name}")
            if name in self._evaluating:
                raise EvalError(f"local.{name} refers to itself")
            self._evaluating.add(name)
            try:
                self._locals[name] = self.eval(self.local_exprs[name])
            finally:
                self._evaluating.discard(name)
        return self._locals[name]

    def instances(self, block: Block) -> list[Any]:
        """The instance keys of a resource or data block: [None] without count or for_each."""
        return [key for key, _ in self.instance_scopes(block)]

    def instance_scopes(self, block: Block) -> list[tuple[Any, Scope]]:
        """Each instance's key with the scope its arguments are evaluated in: count.index, or
        each.key and each.value (a map's values may be known only after apply, not its keys)."""
        if "count" in block.attrs:
            count = int(tf_number(known(self.eval(block.attrs["count"]))))
            return [(i, self.scope.bind(count={"index": i})) for i in range(count)]
        if "for_each" in block.attrs:
            each = self.eval(block.attrs["for_each"])
            if isinstance(each, Placeholder):
                raise UnknownValue(each)
            items = [(k, k) for k in known(each)] if isinstance(each, list) else list(each.items())
            return [(k, self.scope.bind(each={"key": k, "value": v})) for k, v in items]
        return [(None, self.scope)]

    def exists(self, kind: str, name: str, data: bool = False) -> bool:
        block = (self.data if data else self.resources).get((kind, name))
        return block is not None and len(self.instances(block)) > 0

    def resource_attr(self, kind: str, name: str, index: Any, attr: str) -> Any:
        block = self.resources.get((kind, name))
        if block is None:
            raise EvalError(f"no resource {kind}.{name}")
        scopes = dict(self.instance_scopes(block))
        if index is None and list(scopes) != [None]:
            raise EvalError(f"{kind}.{name} has count or for_each: index it")
        if index not in scopes:
            raise EvalError(f"{kind}.{name}[{index!r}] does not exist (instances: {list(scopes)})")
        if self.resolve_attributes and attr in block.attrs:
            return self.eval(block.attrs[attr], scopes[index])
        return Placeholder("{{" + f"{kind}.{name}.{attr}" + "}}")

    def data_attr(self, kind: str, name: str, index: Any, attr: str) -> Any:
        block = self.data.get((kind, name))
        if block is None:
            raise EvalError(f"no data source {kind}.{name}")
        scope = dict(self.instance_scopes(block)).get(index)
        if scope is None:
            raise EvalError(f"data.{kind}.{name}[{index!r}] does not exist (instances: {self.instances(block)})")
        if kind == "aws_partition" and attr == "partition":
            return self.context["partition"]
        if kind == "aws_region" and attr == "region":
            return self.context["region"]
        if kind == "aws_caller_identity" and attr == "account_id":
            return self.context["account_id"]
        if kind == "aws_iam_policy_document" and attr == "json":
            return jsonencode(self.policy_document(block, scope))
        raise EvalError(f"data.{kind}.{name}.{attr} is not known offline")

    # -- the IAM policy documents

    def policy_document(self, block: Block, scope: Scope) -> dict:
        """A policy document's JSON, in the scope of its instance (its each or count.index)."""
        sources = self.attr(block, "source_policy_documents", [], scope)
        statements = [s for source in sources for s in json.loads(source)["Statement"]]
        for child in block.blocks:
            if child.type == "statement":
                statements.append(self.statement(child, scope))
            elif child.type == "dynamic" and child.labels == ["statement"]:
                statements += [self.statement(content, inner) for content, inner in self.dynamic_contents(child, scope)]
            else:
                raise EvalError(f"{block.file}:{child.line}: {child.type} in a policy document is not read here")
        return {"Version": "2012-10-17", "Statement": statements}

    def dynamic_contents(self, block: Block, scope: Scope) -> list[tuple[Block, Scope]]:
        """A dynamic block's content once for each of its for_each, with the scope binding its
        iterator (the block's name, or `iterator`)."""
        each = self.eval(block.attrs["for_each"], scope)
        if isinstance(each, Placeholder):
            raise UnknownValue(each)
        items = list(enumerate(each)) if isinstance(each, list) else list(each.items())
        iterator = block.attrs.get("iterator")
        name = _identifier(iterator.children[0]) if iterator is not None else block.labels[0]
        return [(block.block("content"), scope.bind(**{name: {"key": k, "value": v}})) for k, v in items]

    def statement(self, block: Block, scope: Scope) -> dict:
        def get(name: str, default: Any = None) -> Any:
            return self.eval(block.attrs[name], scope) if name in block.attrs else default

        out: dict[str, Any] = {}
        if get("sid") is not None:
            out["Sid"] = get("sid")
        out["Effect"] = get("effect", "Allow")
        for attr, key in (("actions", "Action"), ("not_actions", "NotAction"), ("resources", "Resource"), ("not_resources", "NotResource")):
            if attr in block.attrs:
                out[key] = list(get(attr))
        for principals in block.blocks_of("principals"):
            kind = self.eval(principals.attrs["type"], scope)
            out.setdefault("Principal", {})[kind] = list(self.eval(principals.attrs["identifiers"], scope))
        conditions = [(condition, scope) for condition in block.blocks_of("condition")]
        for child in block.blocks_of("dynamic"):
            if child.labels != ["condition"]:
                raise EvalError(f"{block.file}:{child.line}: dynamic {child.labels[0]} blocks inside a statement are not read here")
            conditions += self.dynamic_contents(child, scope)
        for condition, inner in conditions:
            test = self.eval(condition.attrs["test"], inner)
            variable = self.eval(condition.attrs["variable"], inner)
            out.setdefault("Condition", {}).setdefault(test, {})[variable] = list(self.eval(condition.attrs["values"], inner))
        return out

    # -- expressions

    def eval(self, tree: Any, scope: Scope | None = None) -> Any:
        return _Evaluator(self, scope or self.scope).eval(tree)

    def attr(self, block: Block, name: str, default: Any = None, scope: Scope | None = None) -> Any:
        return self.eval(block.attrs[name], scope) if name in block.attrs else default


def convert(value: Any, type_tree: Tree, config: Configuration) -> Any:
    """`value` converted to the variable type `type_tree`: object attributes left out become
    null, or their optional(type, default)'s default."""
    node = type_tree
    while isinstance(node, Tree) and node.data == "expr_term" and len(node.children) == 1 and isinstance(node.children[0], Tree):
        node = node.children[0]
    if not isinstance(node, Tree) or node.data != "function_call" or value is None:
        return value
    name = _identifier(node.children[0])
    args = _call_args(node)
    if name == "object":
        if not isinstance(value, dict):
            raise EvalError(f"an object is required, got {value!r}")
        spec = args[0]
        while spec.data == "expr_term":
            spec = spec.children[0]
        attrs: dict[str, Tree] = {}
        for elem in spec.children:
            if isinstance(elem, Tree) and elem.data == "object_elem":
                key = elem.children[0].children[0]
                while isinstance(key, Tree) and key.data == "expr_term":
                    key = key.children[0]
                attrs[_identifier(key)] = elem.children[-1]
        extra = set(value) - set(attrs)
        if extra:
            raise EvalError(f"attributes {sorted(extra)} are not in the object type")
        out = {}
        for key, attr_type in attrs.items():
            inner = attr_type
            while isinstance(inner, Tree) and inner.data == "expr_term" and isinstance(inner.children[0], Tree):
                inner = inner.children[0]
            optional = isinstance(inner, Tree) and inner.data == "function_call" and _identifier(inner.children[0]) == "optional"
            if key in value and value[key] is not None:
                out[key] = convert(value[key], _call_args(inner)[0] if optional else attr_type, config)
            elif optional:
                opt_args = _call_args(inner)
                out[key] = config.eval(opt_args[1]) if len(opt_args) > 1 else None
            elif key in value:
                out[key] = None
            else:
                raise EvalError(f"attribute {key} is required")
        return out
    if name in ("list", "set"):
        return [convert(v, args[0], config) for v in value]
    if name == "map":
        return {k: convert(v, args[0], config) for k, v in value.items()}
    return value


def _call_args(call: Tree) -> list[Tree]:
    for child in call.children:
        if isinstance(child, Tree) and child.data == "arguments":
            return [a for a in child.children if isinstance(a, Tree) and a.data != "new_line_or_comment"]
    return []


class _Evaluator:
    def __init__(self, config: Configuration, scope: Scope):
        self.config = config
        self.scope = scope

    def eval(self, node: Any) -> Any:
        if isinstance(node, Token):
            raise EvalError(f"unexpected token {node!r}")
        method = getattr(self, f"_{node.data}", None)
        if method is None:
            raise EvalError(f"{node.data} expressions are not evaluated here")
        return method(node)

    def _trees(self, node: Tree) -> list[Tree]:
        return [c for c in node.children if isinstance(c, Tree) and c.data != "new_line_or_comment"]

    def _expr_term(self, node: Tree) -> Any:
        trees = self._trees(node)
        if len(trees) != 1:
            raise EvalError("an empty expression")
        return self.eval(trees[0])

    def _int_lit(self, node: Tree) -> int:
        return int(str(node.children[0]))

    def _float_lit(self, node: Tree) -> float:
        return float(str(node.children[0]))

    def _literal_value(self, node: Tree) -> Any:
        return {"true": True, "false": False, "null": None}[str(node.children[0])]

    def _string(self, node: Tree) -> Any:
        parts, unknown = [], False
        for part in node.children:
            if not isinstance(part, Tree):
                continue
            child = part.children[0]
            if isinstance(child, Token):
                if child.type == "STRING_CHARS":
                    parts.append(_unescape(str(child)))
                elif child.type in ("ESCAPED_INTERPOLATION", "ESCAPED_DIRECTIVE"):
                    parts.append(str(child)[1:])
                else:
                    raise EvalError(f"string part {child.type} is not evaluated here")
            elif child.data == "interpolation":
                value = self.eval(self._trees(child)[0])
                unknown = unknown or is_unknown(value)
                parts.append(tf_string(value))
            else:
                raise EvalError("template directives are not evaluated here")
        text = "".join(parts)
        return Placeholder(text) if unknown else text

    def _tuple(self, node: Tree) -> list:
        return [self.eval(c) for c in self._trees(node)]

    def _object(self, node: Tree) -> dict:
        out = {}
        for elem in self._trees(node):
            key_node = elem.children[0].children[0]
            bare = key_node
            while isinstance(bare, Tree) and bare.data == "expr_term" and len(bare.children) == 1 and isinstance(bare.children[0], Tree):
                bare = bare.children[0]
            if isinstance(bare, Tree) and bare.data in ("identifier", "keyword"):
                key = _identifier(bare)
            else:
                key = tf_string(self.eval(key_node))
            out[key] = self.eval(elem.children[-1])
        return out

    def _identifier(self, node: Tree) -> Any:
        name = str(node.children[0])
        if name in self.scope.names:
            return self.scope.names[name]
        raise EvalError(f"{name} alone is not a value here")

    def _function_call(self, node: Tree) -> Any:
        name = _identifier(node.children[0])
        args = _call_args(node)
        if name == "can":
            try:
                self.eval(args[0])
                return True
            except UnknownValue:
                raise
            except EvalError:
                return False
        if name == "try":
            for arg in args:
                try:
                    return self.eval(arg)
                except UnknownValue:
                    raise
                except (EvalError, KeyError, IndexError, TypeError):
                    continue
            raise EvalError("try: every argument failed")
        if name in ("file", "filebase64sha256", "filemd5", "filesha256"):
            path = self.eval(args[0])
            return Placeholder("{{" + f"{name}({path})" + "}}")
        f = FUNCTIONS.get(name)
        if f is None:
            raise EvalError(f"function {name} is not evaluated here")
        return f(*[self.eval(a) for a in args])

    def _conditional(self, node: Tree) -> Any:
        trees = self._trees(node)
        condition = known(self.eval(trees[0]))
        if not isinstance(condition, bool):
            raise EvalError(f"a condition must be a bool, got {condition!r}")
        return self.eval(trees[1] if condition else trees[2])

    def _unary_op(self, node: Tree) -> Any:
        op = str(node.children[0])
        value = self.eval(node.children[1])
        if op == "!":
            if not isinstance(known(value), bool):
                raise EvalError(f"! needs a bool, got {value!r}")
            return not value
        return -tf_number(value)

    def _binary_op(self, node: Tree) -> Any:
        left = self.eval(node.children[0])
        term = node.children[1]
        op = str(term.children[0].children[0])
        right = self.eval(self._trees(term)[1])
        if op == "==":
            return tf_equal(left, right)
        if op == "!=":
            return not tf_equal(left, right)
        if op in ("&&", "||"):
            for v in (left, right):
                if not isinstance(known(v), bool):
                    raise EvalError(f"{op} needs bools, got {v!r}")
            return (left and right) if op == "&&" else (left or right)
        a, b = tf_number(left), tf_number(right)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "%":
            return a % b
        return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]

    # -- traversals: var.x, local.x, aws_t.n[0].a, data.aws_t.n.a, path.module, each/count

    def _traversal(self, node: Tree) -> tuple[Tree, list[tuple[str, Any]]]:
        steps: list[tuple[str, Any]] = []
        while True:
            if node.data == "expr_term" and len(self._trees(node)) == 1 and not any(isinstance(c, Token) for c in node.children):
                node = self._trees(node)[0]
                continue
            if node.data == "get_attr_expr_term":
                steps.append(("attr", _identifier(node.children[1].children[1])))
                node = node.children[0]
                continue
            if node.data == "index_expr_term":
                index = node.children[1]
                if index.data == "short_index":
                    steps.append(("index", int(str(index.children[1]))))
                else:
                    steps.append(("index", self.eval(self._trees(index)[0])))
                node = node.children[0]
                continue
            break
        steps.reverse()
        return node, steps

    def _get_attr_expr_term(self, node: Tree) -> Any:
        return self._reference(node)

    def _index_expr_term(self, node: Tree) -> Any:
        return self._reference(node)

    def _reference(self, node: Tree) -> Any:
        root, steps = self._traversal(node)
        config = self.config
        if root.data == "identifier":
            name = str(root.children[0])
            rest = steps
            if name in self.scope.names:
                value = self.scope.names[name]
            elif name == "var":
                value, rest = config.var(steps[0][1]), steps[1:]
            elif name == "local":
                value, rest = config.local(steps[0][1]), steps[1:]
            elif name == "path":
                if steps[0][1] not in ("module", "root", "cwd"):
                    raise EvalError(f"path.{steps[0][1]}")
                value, rest = config.directory, steps[1:]
            elif name == "data":
                kind, label = steps[0][1], steps[1][1]
                rest = steps[2:]
                index = None
                if rest and rest[0][0] == "index":
                    index, rest = rest[0][1], rest[1:]
                value, rest = config.data_attr(kind, label, index, rest[0][1]), rest[1:]
            elif name == "module":
                raise EvalError("module outputs are not evaluated here")
            elif re.match(r"^[a-z0-9]+_[a-z0-9_]+$", name):
                label = steps[0][1]
                rest = steps[1:]
                index = None
                if rest and rest[0][0] == "index":
                    index, rest = rest[0][1], rest[1:]
                if not rest:
                    raise EvalError(f"{name}.{label}: a whole resource is not evaluated here")
                value, rest = config.resource_attr(name, label, index, rest[0][1]), rest[1:]
            else:
                raise EvalError(f"unknown name {name}")
        else:
            value, rest = self.eval(root), steps
        for kind, key in rest:
            if isinstance(value, Placeholder):
                value = Placeholder(value[:-2] + f".{key}" + "}}")
                continue
            if value is None:
                raise EvalError(f"attempt to get {key!r} from null")
            if kind == "attr":
                if not isinstance(value, dict) or key not in value:
                    raise EvalError(f"no attribute {key} in {value!r}")
                value = value[key]
            else:
                if isinstance(value, list):
                    i = int(tf_number(key))
                    if not 0 <= i < len(value):
                        raise EvalError(f"index {i} out of range")
                    value = value[i]
                else:
                    value = value[tf_string(key)]
        return value

    def _for_tuple_expr(self, node: Tree) -> list:
        return self._for(node, as_object=False)

    def _for_object_expr(self, node: Tree) -> dict:
        return self._for(node, as_object=True)

    def _for(self, node: Tree, as_object: bool) -> Any:
        trees = self._trees(node)
        intro = trees[0]
        names = [str(c.children[0]) for c in intro.children if isinstance(c, Tree) and c.data == "identifier"]
        collection = self.eval(self._trees(intro)[-1])
        if isinstance(collection, Placeholder):
            raise UnknownValue(collection)
        cond = next((t for t in trees if t.data == "for_cond"), None)
        body = [t for t in trees[1:] if t.data != "for_cond"]
        items = list(enumerate(collection)) if isinstance(collection, list) else list(collection.items())
        out: Any = {} if as_object else []
        for key, value in items:
            bound = dict(zip(names, [key, value])) if len(names) == 2 else {names[0]: value}
            inner = _Evaluator(self.config, self.scope.bind(**bound))
            if cond is not None and not known(inner.eval(inner._trees(cond)[0])):
                continue
            if as_object:
                out[tf_string(inner.eval(body[0]))] = inner.eval(body[1])
            else:
                out.append(inner.eval(body[0]))
        return out
