"""Learning: torch training and the shared networks, devices, the splits as a model takes them,
features, the reference model, multicut."""
