"""kubetune: Kubernetes-native hyperparameter tuning speaking the Katib v1beta1 API."""
