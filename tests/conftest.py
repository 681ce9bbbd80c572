"""Cross-package tests; the `cluster` and `namespace` fixtures come from the localcluster plugin."""
