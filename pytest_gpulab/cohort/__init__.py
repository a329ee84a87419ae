"""Cohort grading: submission bundles made and opened (``bundle``, ``unbundle``), graded away from the
learner's machine (``regrade``, ``batch``, ``jobs``, ``autograder``), and the cohort report
(``model``, ``report``, ``page``)."""
