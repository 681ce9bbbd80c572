"""kubetune's metrics collector sidecar (upstream Katib's file/tfevent collectors + PNS wait).

Modules, in the order data flows: `tailing` follows files as they grow, `parsing` turns text
lines into metric values, `tfevents` does the same for TensorFlow event files, `summaries`
keeps the running min/max/latest (bounded memory) and the recent values early stopping
looks at, `stopping` evaluates early-stopping rules, `reporting` patches the Trial's
`status.observation`, `collecting` runs it all next to `kubetune.procwait`'s waiter, and
`main` is the command line.
"""
