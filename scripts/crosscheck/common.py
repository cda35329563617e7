"""What every cross-check script needs: the stepwise binary and the shared data folder."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def find_stepwise(given=None):
    """--stepwise, else $STEPWISE or $STEPWISE_BIN, else target/release or target/debug of this checkout."""
    if given:
        return given
    for var in ("STEPWISE", "STEPWISE_BIN"):
        if os.environ.get(var):
            return os.environ[var]
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "stepwise"
        if p.exists():
            return str(p)
    sys.exit("stepwise binary not found: build it (cargo build -p stepwise-cli) or pass --stepwise / STEPWISE")


def shared_data():
    """$STEPWISE_SHARED_DATA, else ../shared/data next to the checkout."""
    return Path(os.environ.get("STEPWISE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def exit_with(failures, ok_message):
    """Print the first 20 failures and exit with status 1, or print `ok_message`."""
    if failures:
        print(f"FAIL: {len(failures)} disagreements", file=sys.stderr)
        for m in failures[:20]:
            print("  " + m, file=sys.stderr)
        sys.exit(1)
    print(ok_message)
