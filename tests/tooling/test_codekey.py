"""The staleness key is the same under every Python: the GPU machine runs 3.12, CI runs 3.11.

Python 3.12 added an empty `type_params` field to every def and class in the tree, and 3.13 leaves
empty fields out of ast.dump: a plain ast.dump keyed the same code differently on each.
"""

import ast

from fieldguide.measuring import codekey

SOURCE = '''
class Buffer:
    size = 4


def copy(n, *, pinned=False):
    return bytes(n)
'''


def _key(tree):
    return "".join(codekey._dump(node) for node in tree.body)


def test_the_fields_python_3_12_adds_do_not_change_the_key(monkeypatch):
    plain = _key(ast.parse(SOURCE))
    newer = ast.parse(SOURCE)
    for cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):  # the tree 3.12 builds
        monkeypatch.setattr(cls, "_fields", (*cls._fields, "type_params"), raising=False)
    for node in ast.walk(newer):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.type_params = []
    assert "type_params" in ast.dump(newer)  # the emulation took
    assert _key(newer) == plain


def test_a_code_change_still_changes_the_key():
    assert _key(ast.parse(SOURCE)) != _key(ast.parse(SOURCE.replace("bytes(n)", "bytearray(n)")))
