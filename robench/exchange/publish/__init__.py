"""A leaderboard repository that runs itself: contributions in, checked, merged, published.

``robench init-leaderboard DIR`` writes the repository (:func:`init_repository`) from the
templates in ``robench/exchange/templates/`` (package data); ``robench publish STEP DIR`` runs
one step of its pipeline, the same in CI and on a laptop. Each step is a function that calls
robench's own functions (merge, verify, diff, the site builder) and reads what they return;
none runs a robench command or reads its printed output.

One module per concern, over a small shared one (the way datasette splits ``publish/``):

- ``common``      the repository's paths and defaults, a step's result and its report, paths
                  confined to the repository, the JSON and database files a step writes
- ``repository``  the settings (``leaderboard.json``), the accepted contributions, which
                  contributions are pending, what a pull request changes outside them
- ``lock``        one step at a time per repository; what a step killed mid-way left
- ``steps``       the six steps below
- ``scaffold``    a new repository: its files from the templates, its runner's requirements

``validate``  every pending contribution (a regular ``contributions/*.db`` file under the size
              cap whose content is not yet accepted) is merged into a staging copy of the
              published database: the source must fit the schema whole, every trial must agree
              with itself (and with the data set's labels where the data is installed here with
              the same content), every score must come with its trials and be what this
              installation's metric code recomputes from them, and nothing may conflict with
              what is published or with another pending contribution. Each rejection says
              which of these failed.
``verify``    every trial of each pending contribution must be re-runnable here (unless
              ``verify_allow`` names its data set or model); a sample of them, drawn from a seed
              drawn by the check itself, covering every (model, protocol, kind) stratum and
              weighted by influence, is re-run (:func:`robench.exchange.verify.verify` on a copy
              whose own verification records are dropped), each with the thread count it ran
              with, under its time limit and a total budget. A trial that does not reproduce,
              or cannot be re-run, rejects the contribution. What it found is kept in
              ``.staging/verified.json`` for ``merge``.
``diff``      the published scores are compared with the staging ones
              (:func:`robench.stats.diff.diff_scores`): a score that got worse beyond its
              interval fails the check. The report lists only the scores that change.
``merge``     each pending contribution that merges cleanly *and* passed ``verify`` on this
              content is merged into the published database, all or nothing: the merge runs
              on a copy that replaces the published file only when every contribution passed;
              the pipeline's verification records go in with it, and the contributions are
              recorded in ``published/accepted.json``. A rejected contribution changes nothing.
``build``     the site is rebuilt from the published database into a new folder that replaces
              ``site/`` when it is complete.
``deploy``    the site is copied to a folder (``--to``; the GitHub workflow hands ``site/`` to
              GitHub Pages instead).

``check`` runs validate, verify and diff (what a pull request runs); ``run`` runs check, merge and
build (what the main branch runs). Every step appends its findings to ``.staging/report.md``
(the job summary; Markdown with every name from a contribution escaped, capped under
:data:`REPORT_LIMIT` characters). A contribution is named after its file
(``contributions/alice.db`` is alice's); provenance is the file's name, never what the database
says about itself.

Every step holds a lock on the repository (:func:`repository_lock`), checks the shape of the
repository's JSON files before it writes anything, and writes only inside the repository
(:func:`contained`: no path through a symbolic link).
"""

from robench.exchange.publish.common import (ACCEPTED, DEFAULT_SETTINGS, PUBLISHED, REPORT_LIMIT,
                                             TORCH_CPU_INDEX, StepResult)
from robench.exchange.publish.lock import clear_leftovers, repository_lock
from robench.exchange.publish.repository import accepted, contributions, pending, settings
from robench.exchange.publish.scaffold import init_repository, requirements, template
from robench.exchange.publish.steps import (CHECK, RUN, build, deploy, diff, merge, validate,
                                            verify)

__all__ = ["ACCEPTED", "CHECK", "DEFAULT_SETTINGS", "PUBLISHED", "REPORT_LIMIT", "RUN",
           "TORCH_CPU_INDEX", "StepResult", "accepted", "build", "clear_leftovers",
           "contributions", "deploy", "diff", "init_repository", "merge", "pending",
           "repository_lock", "requirements", "settings", "template", "validate", "verify"]
