"""`make bench`: run every bench/bench_*.py module's main() in turn and print its figures.

Figures are printed, never asserted: the machines are shared and noisy. Each benchmark measures its
ratios within one run. `python -m bench NAME` runs only bench_NAME.
"""
import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main(argv):
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                   if m.name.startswith('bench_'))
    if argv:
        names = [n for n in names if n[len('bench_'):] in argv or n in argv]
    for name in names:
        print(f'\n=== {name} ===', flush=True)
        start = time.monotonic()
        importlib.import_module(f'bench.{name}').main()
        print(f'({name} took {time.monotonic() - start:.1f} s)', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
