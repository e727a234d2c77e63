"""The errors robench reports to a user as one line (exit 2): each says what is wrong and what
to do. Modules raise them; the CLI catches them all here, without importing those modules."""

from __future__ import annotations

import difflib


class DatasetError(ValueError):
    """A data set is malformed; the message says what is wrong."""


class PluginError(Exception):
    """A plugin problem the user must fix (duplicate names, bad registrations)."""


class UnknownComponentError(LookupError):
    """A component name that no plugin registered; the message lists the known names."""

    def __init__(self, kind: str, name: str, known: list):
        self.kind, self.name, self.known = kind, name, sorted(known)
        close = difflib.get_close_matches(name, self.known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        singular = kind[:-1]
        super().__init__(
            f"unknown {singular} '{name}'.{hint} Known {kind}: {', '.join(self.known) or '(none)'}"
            f" (see `robench list {kind}`)."
        )


class ConfigError(ValueError):
    """The requested run cannot be made; the message says what to change."""


class SourcesError(ValueError):
    """The data set cannot be split into the requested sources; the message says why."""


class QueryTimeout(Exception):
    """A query ran longer than its time limit and was stopped."""


class ReadOnlyQueryError(Exception):
    """A statement given to the read-only query interface would change the database."""


class ConfigurationError(ValueError):
    """A ``--config`` value names no stored configuration; the message lists the known ones."""


class SchemaError(ValueError):
    """The file is not a robench database this version can use; the message says why."""


class ModelReferenceError(ValueError):
    """A model reference cannot be resolved; the message says why in one line."""


class KnobError(ValueError):
    """A ``--set`` value or a knob declaration is invalid; the message names the knob."""


class DeviceError(ValueError):
    """The requested device is malformed or not available here; the message says which."""


class MergeError(ValueError):
    """A source cannot be merged; the message names it and says why."""


class VerifyError(ValueError):
    """A verification cannot be made as asked; the message says what to change."""


class DocgenError(ValueError):
    """A marked block cannot be generated; the message names the file and the block."""


#: What the CLI turns into one "Error: ..." line and exit status 2.
USER_ERRORS = (DatasetError, PluginError, UnknownComponentError, ConfigError, SourcesError,
               ReadOnlyQueryError, QueryTimeout, ConfigurationError, SchemaError,
               ModelReferenceError, KnobError, DeviceError, MergeError, VerifyError,
               DocgenError)
