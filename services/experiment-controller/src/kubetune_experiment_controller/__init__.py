"""The experiment-controller: drives an Experiment from submission to its best trial.

Modules: `summaries` (a Trial reduced to what counting needs, and the counts and optimum over
them), `rendering` (trial template -> Trial object), `planning` (pure: the next Experiment status,
Suggestion requests and assignments to turn into Trials), `reconciling` (reads, acts, writes
once), `main` (the process).
"""
