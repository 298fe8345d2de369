"""The docstring examples of the package run and print what they claim."""
import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / 'snake_control'
MODULES = sorted('.'.join(p.relative_to(PACKAGE.parent).with_suffix('').parts).removesuffix('.__init__')
                 for p in PACKAGE.rglob('*.py'))
def _source(module: str) -> Path:
    path = PACKAGE.parent / (module.replace('.', '/') + '.py')
    return path if path.exists() else PACKAGE.parent / module.replace('.', '/') / '__init__.py'


EXAMPLES = [m for m in MODULES if '>>>' in _source(m).read_text()]


def test_some_modules_have_examples():
    assert len(EXAMPLES) >= 5, EXAMPLES


@pytest.mark.parametrize('module', EXAMPLES)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f'{result.failed} of {result.attempted} examples failed in {module}'
