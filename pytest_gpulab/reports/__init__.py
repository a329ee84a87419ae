"""Reports: each step's outcome (``steps``), and the JSON, JUnit, summary and Gradescope files
written from them, always written even when the run fails."""
