"""kubetune's db-manager: Katib's gRPC DBManager API served from Trial objects (no database)."""
