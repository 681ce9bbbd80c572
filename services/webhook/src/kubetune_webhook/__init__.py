"""kubetune's admission webhook: Experiment defaulting and validation, trial pod injection."""
