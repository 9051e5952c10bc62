"""The distributed tests share helpers (``mpi_launch``, ``dist_worker``) that live beside them;
with ``--import-mode=importlib`` their folder is not on ``sys.path`` by itself."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
