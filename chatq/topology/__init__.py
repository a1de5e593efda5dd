"""Redis as chatq reaches it: connections, checks of its settings, replicas."""
