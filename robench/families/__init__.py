"""The built-in families of metrics, each a plugin in ``robench.plugins.DEFAULT_PLUGINS``.

A family holds its protocols, its metrics, their reports and leaderboard sections and its own
science modules; the core names none of them. A family outside robench is a plugin
distribution registering the same hooks (see ``plugins/``).
"""
