"""`gpulab watch`: a lab graded again after every change to its files or its cluster, the touched steps first.

The core (``core.Watcher``) needs no terminal: the file and cluster watches (``files``, ``kube``, on
``inotify``), what each step reads (``reads``), one grading as a `pytest --lab` subprocess (``grading``),
the table (``table``); ``view`` shows it on a terminal or as lines.
"""
