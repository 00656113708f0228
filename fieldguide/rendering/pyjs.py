"""Python arithmetic to JavaScript: the calculators' formulas are the estimators' own code.

`translate(module, names)` turns the named functions of a module (and the module-level constants
they read) into one JavaScript source, so the page's calculator runs exactly the code the page
shows and the tests check against the GPU runs: one source of truth per formula, no copy to
drift. `tests/site/test_estimators_js.py` evaluates both with node on a grid of inputs.

It knows the small subset the estimators are written in, and refuses anything else (a
`TranslationError` naming the line), so an estimator that grows a loop or a library call fails
the build instead of computing something else in the browser:

- `def f(a, b=1):` with positional or keyword calls between translated functions;
- numbers, strings, True/False/None, dict literals with string keys, subscripts `D[key]`;
- `+ - * / // % **`, comparisons, `and`/`or`/`not`, `x if c else y`;
- `max`, `min`, `abs`, `math.ceil`, `math.floor`, `math.sqrt`, `math.log2`;
- assignments (also `+=`), `if`/`elif`/`else`, `return`; docstrings and comments are dropped.
"""

from __future__ import annotations

import ast
import inspect
import json
from types import ModuleType


class TranslationError(ValueError):
    """A construct the calculators' JavaScript cannot express the same way."""


BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%", ast.Pow: "**"}
COMPARE = {ast.Eq: "===", ast.NotEq: "!==", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}
BUILTINS = {"max": "Math.max", "min": "Math.min", "abs": "Math.abs"}
MATH = {"ceil": "Math.ceil", "floor": "Math.floor", "sqrt": "Math.sqrt", "log2": "Math.log2"}


class _Function:
    def __init__(self, node: ast.FunctionDef | None, known: dict[str, ast.FunctionDef],
                 constants: set[str], where: str):
        """`node` None: only expressions of module-level constants."""
        self.node, self.known, self.constants, self.where = node, known, constants, where
        self.params = [a.arg for a in node.args.args] if node else []
        self.locals: set[str] = set()

    def fail(self, node: ast.AST, what: str) -> TranslationError:
        return TranslationError(f"{self.where}:{getattr(node, 'lineno', '?')}: {what} has no "
                                "JavaScript translation (fieldguide/rendering/pyjs.py)")

    # -- expressions --
    def expr(self, node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            if node.value is None:
                return "null"
            if isinstance(node.value, bool):
                return "true" if node.value else "false"
            if isinstance(node.value, int | float | str):
                return json.dumps(node.value)
            raise self.fail(node, f"the constant {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in self.params or node.id in self.locals or node.id in self.constants:
                return node.id
            raise self.fail(node, f"the name {node.id!r} (not a parameter, local or constant)")
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(node.op, ast.FloorDiv):
                return f"Math.floor({left} / {right})"
            if type(node.op) not in BINARY:
                raise self.fail(node, type(node.op).__name__)
            return f"({left} {BINARY[type(node.op)]} {right})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return f"(-{self.expr(node.operand)})"
            if isinstance(node.op, ast.Not):
                return f"(!{self.expr(node.operand)})"
            raise self.fail(node, type(node.op).__name__)
        if isinstance(node, ast.BoolOp):
            op = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + op.join(self.expr(v) for v in node.values) + ")"
        if isinstance(node, ast.Compare):
            parts, left = [], node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                if type(op) not in COMPARE:
                    raise self.fail(node, type(op).__name__)
                parts.append(f"({self.expr(left)} {COMPARE[type(op)]} {self.expr(right)})")
                left = right
            return "(" + " && ".join(parts) + ")"
        if isinstance(node, ast.IfExp):
            return f"({self.expr(node.test)} ? {self.expr(node.body)} : {self.expr(node.orelse)})"
        if isinstance(node, ast.Dict):
            items = []
            for key, value in zip(node.keys, node.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    raise self.fail(node, "a dict key that is not a string")
                items.append(f"{json.dumps(key.value)}: {self.expr(value)}")
            return "{" + ", ".join(items) + "}"
        if isinstance(node, ast.Subscript):
            return f"_at({self.expr(node.value)}, {self.expr(node.slice)})"
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(node, type(node).__name__)

    def call(self, node: ast.Call) -> str:
        func = node.func
        if isinstance(func, ast.Name) and func.id in BUILTINS and not node.keywords:
            return f"{BUILTINS[func.id]}({', '.join(self.expr(a) for a in node.args)})"
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "math" and func.attr in MATH and not node.keywords):
            return f"{MATH[func.attr]}({', '.join(self.expr(a) for a in node.args)})"
        if isinstance(func, ast.Name) and func.id in self.known:
            callee = self.known[func.id]
            names = [a.arg for a in callee.args.args]
            args: list[str | None] = [self.expr(a) for a in node.args]
            args += [None] * (len(names) - len(args))
            for keyword in node.keywords:
                if keyword.arg not in names:
                    raise self.fail(node, f"the keyword {keyword.arg!r} of {func.id}()")
                args[names.index(keyword.arg)] = self.expr(keyword.value)
            while args and args[-1] is None:
                args.pop()
            return f"{func.id}({', '.join('undefined' if a is None else a for a in args)})"
        raise self.fail(node, f"the call {ast.unparse(func)}()")

    # -- statements --
    def body(self, statements: list[ast.stmt], indent: str) -> list[str]:
        out = []
        for node in statements:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            if isinstance(node, ast.Return):
                value = "undefined" if node.value is None else self.expr(node.value)
                out.append(f"{indent}return {value};")
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                value = self.expr(node.value)
                declare = "" if name in self.locals or name in self.params else "let "
                self.locals.add(name)
                out.append(f"{indent}{declare}{name} = {value};")
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                if isinstance(node.op, ast.FloorDiv) or type(node.op) not in BINARY:
                    raise self.fail(node, type(node.op).__name__)
                target = self.expr(node.target)
                out.append(f"{indent}{target} = {target} {BINARY[type(node.op)]} "
                           f"{self.expr(node.value)};")
            elif isinstance(node, ast.If):
                # names first bound inside a branch are declared before it
                for name in sorted(_bound(node) - self.locals - set(self.params)):
                    out.append(f"{indent}let {name};")
                    self.locals.add(name)
                out.append(f"{indent}if ({self.expr(node.test)}) {{")
                out += self.body(node.body, indent + "  ")
                if node.orelse:
                    out.append(f"{indent}}} else {{")
                    out += self.body(node.orelse, indent + "  ")
                out.append(f"{indent}}}")
            else:
                raise self.fail(node, type(node).__name__)
        return out

    def source(self) -> str:
        args = self.node.args
        defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise self.fail(self.node, "*args, **kwargs or keyword-only arguments")
        params = [name if default is None else f"{name} = {self.expr(default)}"
                  for name, default in zip(self.params, defaults, strict=True)]
        lines = [f"function {self.node.name}({', '.join(params)}) {{"]
        lines += self.body(self.node.body, "  ")
        return "\n".join(lines + ["}"])


def _bound(node: ast.If) -> set[str]:
    return {t.id for n in ast.walk(node) if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Name)}


# Python's dict lookup fails on a missing key; so does this, rather than giving undefined.
PRELUDE = """\
function _at(table, key) {
  if (!Object.prototype.hasOwnProperty.call(table, key)) {
    throw new Error("no entry " + JSON.stringify(key));
  }
  return table[key];
}"""


def translate(module: ModuleType, names: list[str]) -> str:
    """JavaScript for the functions `names` of `module`, the functions they call in it and the
    module-level constants (numbers, strings, dicts of them) they read."""
    where = inspect.getsourcefile(module) or module.__name__
    tree = ast.parse(inspect.getsource(module))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants: dict[str, ast.AST] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper()):
            constants[node.targets[0].id] = node.value
    wanted: list[str] = []

    def need(name: str) -> None:
        if name in wanted:
            return
        if name not in functions:
            raise TranslationError(f"{where}: no function {name!r} to translate")
        wanted.append(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in functions:
                need(node.func.id)

    for name in names:
        need(name)
    used = {n.id for f in wanted for n in ast.walk(functions[f]) if isinstance(n, ast.Name)}
    parts = [PRELUDE]
    shared = set(constants)
    for name in sorted(used & set(constants)):
        value = _Function(None, functions, shared, where).expr(constants[name])
        parts.append(f"const {name} = {value};")
    for name in sorted(wanted):
        parts.append(_Function(functions[name], functions, shared, where).source())
    return "\n".join(parts) + "\n"
