"""The package's import structure: every room (sub-package or root module) imports only rooms on lower
floors or its own, and no two rooms import each other through any path (docs/architecture.md, "Layers").

Imports are read from the source, wherever they are written: import statements at any depth (the lazy
ones inside functions too), module names in strings (importlib.import_module, NodeSpec.module, f-strings
such as f'snake_control.commands.{name}') and child processes started with `-m snake_control.x`.
"""
import ast
import re
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[1] / 'snake_control'

# Lowest floor first. A room may import its own floor's rooms only if that makes no cycle.
FLOORS = [
    ['paths', 'yaml_file'],
    ['dynamixel'],
    ['robot'],
    ['kinematics', 'description', 'teleop', 'mcap_io'],
    ['gaits', 'estimation'],
    ['physics', 'dynamics'],
    ['validation'],
    ['nodes'],
    ['app'],
    ['commands'],
    ['cli'],
]
FLOOR = {room: k for k, rooms in enumerate(FLOORS) for room in rooms}


MODULE_TEXT = re.compile(r'snake_control(\.\w+)+')


def room_of(module: str) -> str:
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else 'snake_control'


def imported_modules(source: str) -> set[str]:
    """Every snake_control module the source names as an import, a module string or a `-m` target."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and MODULE_TEXT.fullmatch(node.value)):
            found.add(node.value)
        elif (isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant)
              and MODULE_TEXT.match(str(node.values[0].value))):
            found.add(MODULE_TEXT.match(node.values[0].value).group(0))
    return {m for m in found if m.startswith('snake_control.')}


def room_edges() -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> the files that make that edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob('*.py')):
        rel = path.relative_to(PACKAGE.parent)
        module = '.'.join(rel.with_suffix('').parts).removesuffix('.__init__')
        for target in imported_modules(path.read_text()):
            a, b = room_of(module), room_of(target)
            if a != b and a != 'snake_control':
                edges.setdefault((a, b), []).append(str(rel))
    return edges


def test_the_checker_sees_lazy_string_and_child_process_imports():
    source = '''
"""Docstring naming snake_control.app.graph is not an import."""
import subprocess, importlib
def f(name):
    from snake_control.gaits import scheduler
    importlib.import_module('snake_control.physics.servo_plant')
    importlib.import_module(f'snake_control.commands.{name}')
    subprocess.run(['python', '-m', 'snake_control.cli', 'sim-bus'])
'''
    assert imported_modules(source) == {'snake_control.gaits', 'snake_control.physics.servo_plant',
                                        'snake_control.commands', 'snake_control.cli'}


def test_every_room_has_a_floor():
    rooms = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == '.py' and p.stem != '__init__') or (p / '__init__.py').is_file()}
    assert rooms <= set(FLOOR), f'rooms without a floor in FLOORS: {sorted(rooms - set(FLOOR))}'


def test_no_room_imports_upward():
    upward = {edge: files for edge, files in room_edges().items()
              if FLOOR[edge[1]] > FLOOR[edge[0]]}
    assert not upward, '\n'.join(f'{a} (floor {FLOOR[a]}) imports {b} (floor {FLOOR[b]}) in {files}'
                                 for (a, b), files in sorted(upward.items()))


def test_no_cycle_between_rooms():
    graph: dict[str, set[str]] = {}
    for a, b in room_edges():
        graph.setdefault(a, set()).add(b)

    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return path + [nxt]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = [c for c in map(cycle_from, sorted(graph)) if c]
    assert not cycles, f'import cycles between rooms: {cycles}'
