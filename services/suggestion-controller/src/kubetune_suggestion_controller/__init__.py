"""kubetune suggestion-controller: algorithm Deployments, volumes, conditions."""
