"""Learning: torch training and the shared networks, devices, features, the reference model,
boundary checks on what models receive and return, multicut."""
