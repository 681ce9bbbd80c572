"""kubetune's test helpers, installed in every test env (and used by bench/ and the demo).

One place for what every test package needs, so no test imports another package's tests:
`waiting` (poll with one default timeout), `conditions` (read status conditions), `crds`
(install kubetune's and third-party CRDs), `builders` (Experiments, Trials, Jobs as dicts),
`processes` (a service's console script as a process), `standins` (what other services and
third-party operators would write), `deploying` (kubetune's `local` overlay on a cluster), and
the pytest plugin `plugin` (fixtures `kube`, `crds`, `thirdparty_crds`).
"""

from kubetune_testkit.waiting import DEFAULT_TIMEOUT, wait_for

__all__ = ["DEFAULT_TIMEOUT", "wait_for"]
