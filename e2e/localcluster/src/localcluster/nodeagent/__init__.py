"""A process "kubelet" for the local control plane.

``python -m localcluster.nodeagent --kubeconfig K --node-name N --state-dir D
[--image-map M]`` registers Node N, renews its Lease, and runs every pod bound to N as
local processes: one PID + mount namespace per pod (a pause process), a mount namespace
per container with the pod's volumes bind-mounted at their mountPaths, and either the
pod's PID namespace (``shareProcessNamespace``) or a nested one per container.

State under D:

* ``pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log``: the container's
  stdout and stderr (plain text, interleaved); ``<restartCount>.spec.json`` beside it is
  the exact argv, env and mounts it ran with. ``kubectl logs`` reads the same files
  through the agent's HTTPS endpoint (``kubeletserver``).
* ``volumes/<uid>/<plugin>/<volume>``: emptyDir, configMap, secret, projected (service
  account token, ``ca.crt``, ``namespace``) and downwardAPI contents; removed with the pod.
* ``sandboxes/<uid>.json``: the pause PID, so a restarted agent kills leftovers.

Networking: pods share the host network. The node's InternalIP and every podIP is a
10.244.x.y/32 the agent adds to ``lo`` (see ``netaddr``), so Endpoints accept it and all
traffic to it stays on this host; ``--pod-address host`` reports the host's address
instead (status only). Pods reach the API server through ``KUBERNETES_SERVICE_HOST/PORT``
= the kubeconfig's server address, with a TokenRequest token bound to the pod.

Limits, on purpose: no cgroups (resources are only scheduled, never enforced); one port
space for all pods (two pods listening on the same port collide); ``exec`` without stdin
or TTY only (what Argo's controller uses to stop sidecars), no attach or port-forward;
mountPaths missing on the host are created there as empty directories (or empty files for
file subPaths) to serve as mount points; a volume mounted over a
directory that holds the agent's venv hides it from that container.
"""
