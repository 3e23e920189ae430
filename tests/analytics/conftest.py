import sys
from pathlib import Path

# Let the test modules import runs_helpers.py from this directory.
sys.path.insert(0, str(Path(__file__).parent))
