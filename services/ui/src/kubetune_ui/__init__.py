"""kubetune-ui: the web UI (a Starlette app reading the Kubernetes API)."""
