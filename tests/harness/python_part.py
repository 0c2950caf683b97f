"""Runs part of the harness's unittest suite: the tests named on the command line (modules, classes or
methods, as `python -m unittest` takes them), less those named after --except. Run from harness/tests.
The --except form lets ctest split a module without a class added to it later being left out."""
import sys
import unittest


def _names(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _names(item)
        else:
            yield item


def main(argv):
    sys.path.insert(0, ".")  # the test modules, as `python -m unittest` finds them from harness/tests
    keep, drop = argv, []
    if "--except" in argv:
        i = argv.index("--except")
        keep, drop = argv[:i], argv[i + 1:]
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for test in _names(loader.loadTestsFromNames(keep)):
        name = test.id()
        if not any(name == d or name.startswith(d + ".") for d in drop):
            suite.addTest(test)
    if suite.countTestCases() == 0:
        print("python_part: no test left to run in", " ".join(argv), file=sys.stderr)
        return 2
    result = unittest.TextTestRunner(verbosity=1).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
