"""Importing any module of the package leaves the process as it was, and the package uses only
JAX's public API (no `jax._src`)."""

import ast
import json
import os
import pathlib
import subprocess
import sys

import hackmatrix

PACKAGE = pathlib.Path(hackmatrix.__file__).resolve().parent

# Run in a fresh interpreter: imports the package's dependencies first (JAX sets environment
# variables of its own when imported), then records the process state, imports every module of
# the package, and records it again.
PROBE = r'''
import gc, importlib, json, os, pkgutil, signal, sys, types

for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
import jax


def state():
    return {
        "environ": dict(os.environ),
        "signal handlers": [repr(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)],
        "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count()],
        "recursion limit": sys.getrecursionlimit(),
        "streams and hooks": [id(sys.stdin), id(sys.stdout), id(sys.stderr),
                              id(sys.excepthook), id(sys.unraisablehook)],
        "jax config": {name: repr(value) for name, value in jax.config.values.items()},
    }


def stack_sizes(code):
    """(qualified name, first line) -> co_stacksize of `code` and every code object in it."""
    sizes = {(code.co_qualname, code.co_firstlineno): code.co_stacksize}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            sizes.update(stack_sizes(const))
    return sizes


def functions(namespace):
    for value in list(vars(namespace).values()):
        if isinstance(value, types.FunctionType):
            yield value
        elif isinstance(value, type) and value.__module__ == namespace.__name__:
            yield from (f for f in vars(value).values() if isinstance(f, types.FunctionType))


before = state()
import hackmatrix
names = ["hackmatrix"] + [m.name for m in pkgutil.walk_packages(hackmatrix.__path__,
                                                                 "hackmatrix.")]
modules = [importlib.import_module(name) for name in names]
after = state()
changed = {key: [before[key], after[key]] for key in before if before[key] != after[key]}
# A function whose code object no longer declares what its source compiles to was rewritten.
for module in modules:
    with open(module.__file__, encoding="utf-8") as file:
        compiled = stack_sizes(compile(file.read(), module.__file__, "exec"))
    for function in functions(module):
        code = function.__code__
        if code.co_filename == module.__file__:
            expected = compiled.get((code.co_qualname, code.co_firstlineno))
            if expected is not None and expected != code.co_stacksize:
                changed[f"code of {module.__name__}.{code.co_qualname}"] = [
                    expected, code.co_stacksize]
print(json.dumps({"modules": len(modules), "changed": changed}))
'''

LIST_DEPENDENCIES = r'''
import importlib, json, pkgutil, sys
import hackmatrix
for module in pkgutil.walk_packages(hackmatrix.__path__, "hackmatrix."):
    importlib.import_module(module.name)
top_level = {name.split(".")[0] for name in sys.modules} - {"hackmatrix", "__main__"}
# Only what an import statement loads: extension modules register helper modules without a spec.
print(json.dumps(sorted(name for name in top_level
                        if getattr(sys.modules.get(name), "__spec__", None) is not None)))
'''


def _run(program: str, *args: str) -> str:
    env = {key: value for key, value in os.environ.items()
           if key not in ("XLA_FLAGS", "HACKMATRIX_CPU_COMPILE")}
    result = subprocess.run([sys.executable, "-c", program, *args], capture_output=True,
                            text=True, timeout=300, env={**env, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_importing_every_module_changes_nothing_in_the_process():
    dependencies = _run(LIST_DEPENDENCIES)
    report = json.loads(_run(PROBE, dependencies))
    assert report["modules"] > 50  # every module was imported, subpackages too
    assert report["changed"] == {}


def _jax_src_uses(tree: ast.AST) -> list[int]:
    """Line numbers where `tree` imports or names `jax._src`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute):
            names = [f"{ast.unparse(node.value)}.{node.attr}"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]  # importlib.import_module("jax._src..."), sys.modules[...]
        else:
            continue
        if any(name == "jax._src" or name.startswith("jax._src.") for name in names):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_module_uses_jax_internals():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 50
    uses = {str(path.relative_to(PACKAGE)): lines for path in sources
            if (lines := _jax_src_uses(ast.parse(path.read_text(encoding="utf-8"))))}
    assert uses == {}


def test_the_scan_finds_each_way_of_naming_jax_internals():
    for source in ("import jax._src.xla_bridge", "from jax._src import xla_bridge",
                   "from jax import _src", "jax._src.config", "sys.modules.get('jax._src.x')"):
        assert _jax_src_uses(ast.parse(source)) == [1], source
    assert _jax_src_uses(ast.parse("import jax\nfrom jax.extend import backend")) == []
