"""Local Kubernetes control plane for kubetune tests (etcd, apiserver, KCM, scheduler)."""
