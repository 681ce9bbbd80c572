"""The `kubetune` command: submit Experiments and follow them, for users of any cluster."""
