"""The repository is self-contained: every document and file path a tracked file cites is in it."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = r'(?:snake_control|test|bench|docs|config|launch|snake_description|resource)'
REPO_PATH = re.compile(TOP + r'/[\w./-]*\w\.(?:py|md|yaml|xacro|rviz|png|txt)\b')
DOCUMENT = re.compile(r'(?<![\w/.-])[\w-]+\.md\b')
# Documents on someone's disk (run-time scratch paths under /tmp are not citations).
OUTSIDE = re.compile(r'(?<![\w.])/(?:work|home|root)/[\w./-]+')


def tracked_names() -> list[str]:
    return subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def tracked_text_files():
    for name in tracked_names():
        if name == 'test/test_citations.py':   # its own examples cite missing files on purpose
            continue
        path = ROOT / name
        if not path.is_file() or path.suffix in ('.png', '.mcap', '.stl', '.dae'):
            continue
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:
            continue


def missing_citations(name: str, text: str) -> list[str]:
    known_docs = {Path(n).name for n in tracked_names() if n.endswith('.md')}
    bad = [f'{m} (outside the repository)' for m in OUTSIDE.findall(text)]
    bad += [m for m in REPO_PATH.findall(text) if '*' not in m and not (ROOT / m).exists()]
    bad += [m for m in DOCUMENT.findall(text) if m not in known_docs]
    return bad


def test_the_check_catches_a_missing_document_and_an_outside_path():
    assert missing_citations('x.py', 'see MATH.md section 2') == ['MATH.md']
    assert missing_citations('x.py', 'values from /work/shared/table.csv') == [
        '/work/shared/table.csv (outside the repository)']
    assert missing_citations('x.py', 'docs/estimation.md and snake_control/robot.py') == []
    assert missing_citations('x.py', 'snake_control/nowhere.py') == ['snake_control/nowhere.py']


def test_every_cited_document_and_path_is_in_the_repository():
    problems = [f'{name}: {cite}' for name, text in tracked_text_files() for cite in missing_citations(name, text)]
    assert not problems, 'cited but not in the repository:\n' + '\n'.join(problems)
