"""What is registered: `robench list`, `knobs`, `plugins` and `data fetch`."""

from __future__ import annotations

import difflib

import click

from robench.run.config import PROFILES, describe_knob, format_value, knob_sections

from robench.cli.common import KIND_NAMES, echo, friendly_errors, load_registry, report_broken_plugins
from robench.builtin.torchvision_data import data_dir as current, fetch, set_data_dir
from robench.present.formatting import printable


@click.group()
def data():
    """Get data sets that robench reads by reference (torchvision:NAME)."""


@data.command("fetch")
@click.argument("name")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where to put the files (default: $ROBENCH_DATA_DIR or "
                   "~/.local/share/robench); `robench run --data-dir` reads them there.")
@friendly_errors
def data_fetch(name, data_dir):
    """Download a torchvision data set (NAME as in torchvision:NAME) with torchvision.

    Files already there are kept. Offline, the error names the files to copy in by hand.

    \b
    Examples:
      robench data fetch fashion-mnist
      robench data fetch cifar10 --data-dir /shared/data
      robench run -d torchvision:cifar10 --data-dir /shared/data -m cnn-2
    """
    if data_dir:
        set_data_dir(data_dir)
    root = current()
    files = fetch(name.lower(), root)
    click.echo(f"{name}: {len(files)} file(s) under {root}; use -d torchvision:{name.lower()}"
               + (f" --data-dir {data_dir}" if data_dir else ""))


@click.command("list")
@click.argument("kind", required=False, type=click.Choice(KIND_NAMES))
@friendly_errors
def list_(kind):
    """List registered components with a one-line description.

    \b
    Examples:
      robench list
      robench list models
    """
    reg = load_registry()
    report_broken_plugins(reg)
    for k in ([kind] if kind else KIND_NAMES):
        echo(f"{k}:")
        for spec in reg.all(k):
            # opt-in is said once, in the description's words where it has them
            extra = (f" (knobs: --set {spec.section}.*)" if k == "protocols" and spec.knobs
                     else " (opt-in: slow)" if not getattr(spec, "in_default_run", True)
                     and "opt-in" not in spec.description else "")
            echo(f"  {spec.name:<18} {spec.description}{extra}  [{spec.plugin}]")
        resolvers = {"datasets": ("resolvers", "-d"), "models": ("model-resolvers", "-m")}
        if k in resolvers and reg.all(resolvers[k][0]):
            click.echo(f"  by reference, no plugin needed ({resolvers[k][1]} SCHEME:...):")
            for r in reg.all(resolvers[k][0]):
                echo(f"    {r.syntax}")
                echo(f"        {r.description}  [{r.plugin}]")
                if getattr(r, "examples", None):
                    echo(f"        e.g. {', '.join(r.examples)}")
            if k == "models" and any(r.name == "timm" for r in reg.all("model-resolvers")):
                click.echo("    any timm architecture name works: python -c \"import timm; "
                           "print(timm.list_models())\" lists them")


@click.command()
@click.argument("section", required=False)
@friendly_errors
def knobs(section):
    """List the knobs of every section: type, default, per-profile values, what each does.

    The core owns the `train` section; every other section belongs to a registered protocol.
    Change one with `robench run --set SECTION.KEY=VALUE`.

    \b
    Examples:
      robench knobs
      robench knobs train
    """
    sections = knob_sections(load_registry())
    if section is not None and section not in sections:
        close = difflib.get_close_matches(section, list(sections), n=1)
        raise click.BadParameter(
            f"unknown section '{section}'." + (f" Did you mean '{close[0]}'?" if close else "")
            + f" Known: {', '.join(sorted(sections))}", param_hint="SECTION")
    for name, (owner, knob_list) in sorted(sections.items()):
        if section not in (None, name):
            continue
        echo(f"{name} ({owner}):")
        for knob in knob_list:
            values = ", ".join(f"{p} {format_value(knob.value_for(p))}" for p in PROFILES)
            echo(f"  {name}.{knob.name} = {values}")
            echo(f"      {describe_knob(knob)}; {knob.help}")


@click.command()
@friendly_errors
def plugins():
    """List every plugin: name, version, status and the components it registers.

    A plugin that fails to import, registers something robench cannot use, raises (anything,
    SystemExit and KeyboardInterrupt included), ends or hangs its process while loading
    (past $ROBENCH_PLUGIN_TIMEOUT seconds, default 30) is disabled alone and listed here with
    the reason; every other plugin and command works as before.

    \b
    Example:
      robench plugins
    """
    reg = load_registry()
    for info in sorted(reg.infos.values(), key=lambda i: (i.source != "builtin", i.name)):
        comps = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(info.components.items()))
        status = click.style(info.status, fg="green" if info.status == "ok" else "red")
        click.echo(f"{printable(info.name)} {printable(info.version)} [{info.source}] {status}")
        if comps:
            click.echo(f"    {printable(comps)}")
        if info.error:
            click.echo(f"    error: {printable(info.error)}")


COMMANDS = (data, list_, knobs, plugins)
