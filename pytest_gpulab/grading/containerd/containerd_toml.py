"""Reading containerd configuration the way containerd does, with the traps named.

Shared by the labs' graders: where the CRI plugin's runtimes live in a version
2 or 3 file, how an ``imports`` glob resolves, and the diagnosis of the usual
TOML mistakes. The two rules every step reading a containerd file calls:
:func:`top_level` (keys above the first table) and :func:`expect_plugins_match_version`.
"""

from __future__ import annotations

import tomllib
from typing import Any

from ..feedback import fail
from ..parsing import dig, misplaced

CRI_V2 = "io.containerd.grpc.v1.cri"
"""The CRI plugin of a version 2 configuration (containerd 1.x), which holds the runtimes.

Example:: dig(config, "plugins", CRI_V2, "containerd", "default_runtime_name")
"""
CRI_V3_RUNTIME = "io.containerd.cri.v1.runtime"
"""The plugin that holds the runtimes in a version 3 configuration (containerd 2.x).

Example:: runtime_table(config, "etc/config-v3.toml", "nvidia", CRI_V3_RUNTIME)
"""
RUNTIMES_TABLE_V2 = f'plugins."{CRI_V2}".containerd.runtimes'
"""The runtimes table of a version 2 configuration, as TOML writes its name.

Example:: should_be("CONFLICT_TABLE", Words(RUNTIMES_TABLE_V2), table)
"""

CRI_V3_IMAGES = "io.containerd.cri.v1.images"
V3_ONLY_PLUGINS = (CRI_V3_RUNTIME, CRI_V3_IMAGES)
V3_HOMES = {  # what version 3 moved out of the grpc plugin, and where it went
    "containerd": f'plugins."{CRI_V3_RUNTIME}".containerd', "registry": f'plugins."{CRI_V3_IMAGES}".registry',
    "cni": f'plugins."{CRI_V3_RUNTIME}".cni', "sandbox_image": f'plugins."{CRI_V3_IMAGES}".pinned_images.sandbox',
}  # fmt: skip

UNQUOTED_HINT = "A table name containing dots must quote that part: write " + (
    f'[plugins."{CRI_V2}".containerd...], otherwise TOML builds plugins.io.containerd.grpc... instead.'
)


def has_unquoted_plugin_path(document: dict[str, Any], plugin: str = CRI_V2) -> bool:
    """True when ``plugins.io.containerd...`` exists: the plugin name was not quoted."""
    return dig(document, "plugins", *plugin.split(".")) is not None


def cri_containerd(document: dict[str, Any], display: str, plugin: str = CRI_V2) -> dict[str, Any]:
    """The ``plugins."<plugin>".containerd`` table, or a failure naming the likely mistake.

    Example:: cri_containerd(config, "etc/config.toml").get("default_runtime_name")
    """
    __tracebackhide__ = True
    table = dig(document, "plugins", plugin, "containerd")
    if has_unquoted_plugin_path(document, plugin):  # beside the quoted table or instead of it: containerd ignores it
        what = (
            "sets part of its settings under"
            if isinstance(table, dict)
            else f'has no plugins."{plugin}" table: it writes'
        )
        fail(
            f"{display} {what} plugins.{plugin} without quotes, which the parser reads as nested tables (plugins, io, "
            "containerd, ...) that containerd ignores.",
            hint=UNQUOTED_HINT,
            detail=document,
        )
    if isinstance(table, dict):
        return table
    other, version = (CRI_V3_RUNTIME, 3) if plugin == CRI_V2 else (CRI_V2, 2)
    if isinstance(dig(document, "plugins", other, "containerd"), dict):
        fail(
            f'{display} has no [plugins."{plugin}".containerd] table: its runtimes sit under plugins."{other}", '
            f"the plugin name of a version {version} configuration.",
            detail=document,
        )
    fail(f'{display} has no [plugins."{plugin}".containerd] table.', detail=document)


def table_name(path: tuple[str, ...]) -> str:
    """A table path as TOML writes it: ``plugins."io.containerd.grpc.v1.cri".containerd``.

    Example:: table_name(("plugins", CRI_V2, "containerd"))  # plugins."io.containerd.grpc.v1.cri".containerd
    """
    return ".".join(f'"{part}"' if not part.replace("_", "").replace("-", "").isalnum() else part for part in path)


def runtime_table(document: dict[str, Any], display: str, name: str, plugin: str = CRI_V2) -> dict[str, Any]:
    """The ``runtimes.<name>`` table under the plugin, or a failure naming the likely mistake.

    Example:: runtime_table(config, "etc/config.toml", "nvidia", CRI_V3_RUNTIME)
    """
    __tracebackhide__ = True
    runtime = dig(cri_containerd(document, display, plugin), "runtimes", name)
    if not isinstance(runtime, dict):
        fail(
            f"{display} has no [{table_name(('plugins', plugin, 'containerd', 'runtimes', name))}] table.",
            hint=misplaced(document, "plugins", plugin, "containerd", "runtimes", name, toml=True),
            detail=document,
        )
    return runtime


def _written_in(runtime: dict[str, Any], key: str, runtime_path: str) -> str | None:
    """The table below the runtime's where ``key`` is written, as a header; None when it is nowhere in it."""
    found = find_key(runtime, key)
    return f"[{runtime_path}{''.join('.' + part for part in found[0][0])}]" if found else None


def runtime_option(runtime: dict[str, Any], key: str, display: str, runtime_path: str) -> Any:
    """``options.<key>`` of a runtime table; a key written beside ``options`` fails, saying where it belongs.

    Example:: runtime_option(runc, "SystemdCgroup", CONFIG, f'plugins."{CRI_V2}".containerd.runtimes.runc')
    """
    __tracebackhide__ = True
    options = runtime.get("options")
    if isinstance(options, dict) and key in options:
        return options[key]
    if where := _written_in(runtime, key, runtime_path):
        fail(
            f"{display} has {key} in {where}, not in [{runtime_path}.options].",
            hint=f"containerd reads {key} only from the runtime's options table: put it under [{runtime_path}.options].",
            detail=runtime,
        )
    return None


def misplaced_table(document: dict[str, Any], *path: str) -> str | None:
    """A diagnosis for a key missing at ``path`` but written in another table: both tables, as headers.

    Example:: hint=misplaced_table(config, "plugins", CRI_V2, "containerd", "default_runtime_name")
    """
    return misplaced(document, *path, toml=True)


def runtime_key(runtime: dict[str, Any], key: str, display: str, runtime_path: str) -> Any:
    """A key of the runtime table itself (``runtime_type``); one written in its ``options`` fails, saying where.

    Example:: runtime_key(nvidia, "runtime_type", DROPIN, f'plugins."{CRI_V2}".containerd.runtimes.nvidia')
    """
    __tracebackhide__ = True
    if key in runtime:
        return runtime[key]
    if where := _written_in(runtime, key, runtime_path):
        fail(
            f"{display} has {key} in {where}, where containerd does not read it: it belongs in [{runtime_path}].",
            hint=f"Move {key} up to the runtime's own table, above its options.",
            detail=runtime,
        )
    return None


def stranded_table(document: dict[str, Any], key: str) -> str | None:
    """The table a top-level key was written under by mistake (after a [table] header), if any.

    Example:: stranded_table(config, "imports")  # "plugins" when imports came after [plugins]
    """
    stranded = find_key(document, key)
    return table_name(stranded[0][0]) if stranded and stranded[0][0] else None


def top_level(document: dict[str, Any], key: str, display: str) -> Any:
    """A top-level key's value (None when absent); one written after a [table] header fails, naming that table.

    Example:: imports = top_level(config, "imports", "etc/containerd/config.toml")
    """
    __tracebackhide__ = True
    if key in document:
        return dig(document, key)
    table = stranded_table(document, key)
    if table:
        fail(
            f"{key} sits under [{table}] in {display}: TOML puts a key after a table header inside that table, "
            "so containerd never sees it; move it above the first table.",
            detail=document,
        )
    return None


def plugin_version_mismatch(document: dict[str, Any], version: int) -> str | None:
    """The first table of the other config version in a file read as ``version`` (2 or 3), as TOML names it."""
    plugins = document.get("plugins")
    if not isinstance(plugins, dict):
        return None
    if version == 2:
        return next((table_name(("plugins", p)) for p in V3_ONLY_PLUGINS if p in plugins), None)
    grpc = plugins.get(CRI_V2)
    if version != 3 or not isinstance(grpc, dict):
        return None
    keys: list[tuple[str, ...]] = [(key,) for key in V3_HOMES if key in grpc]
    keys += [(*path, key) for key in ("runtimes", "default_runtime_name") for path, _ in find_key(grpc, key)]
    return table_name(("plugins", CRI_V2, *keys[0])) if keys else None


def expect_plugins_match_version(
    document: dict[str, Any], display: str, read_as: int | None = None, main: str | None = None, imported: bool = False
) -> None:
    """The file's plugin names are those of its config version: ``io.containerd.grpc.v1.cri`` holds the
    runtimes in version 2, ``io.containerd.cri.v1.runtime`` in version 3. The version is the file's own
    ``version``; a file that states none is read as ``read_as`` (a drop-in as the ``main`` file it belongs
    to), and with neither nothing is judged. containerd ignores a table of the other version without a word.
    ``imported``: ``main`` imports the file, so stating another version than ``read_as`` fails too.

    Example:: expect_plugins_match_version(learner.file(DROPIN).toml(), DROPIN, 2, main="etc/config.toml")
    """
    __tracebackhide__ = True
    version = dig(document, "version") if type(document.get("version")) is int else None
    if imported and version is not None and version != read_as:
        fail(
            f"{display} says version = {version}, but {main or 'the main file'}, which imports it, is version "
            f"{read_as}: one containerd reads one config version.",
            hint=f"Write the drop-in for version {read_as}, plugin names included, or leave version out.",
            detail=document,
        )
    source = f"is version {version}"
    if version is None and read_as is not None:
        version = read_as
        source = f"states no version, so it is read as version {version}" + (f", as {main} is" if main else "")
    table = plugin_version_mismatch(document, version) if version is not None else None
    if table is None:
        return
    if version == 2:
        fail(
            f"{display} {source}, yet writes [{table}], a version 3 plugin name: a version 2 containerd "
            "has no such plugin and ignores the table without a word.",
            hint="Its plugin names are version 3's: state version = 3 at the top of the file."
            if read_as == 3
            else f'In version 2 the runtimes live under plugins."{CRI_V2}".containerd.',
            detail=document,
        )
    home = V3_HOMES.get(table.removeprefix(f'plugins."{CRI_V2}".').split(".")[0], V3_HOMES["containerd"])
    hint = (
        f"{main} is version 2: leave version = 3 out of the drop-in, whose names are version 2's already."
        if read_as == 2 and main
        else f"In version 3 that plugin keeps only server settings (stream_server_address and the like); "
        f"this one belongs under {home}."
    )
    fail(
        f"{display} {source}, yet sets {table}, a version 2 setting, which version 3 silently ignores.",
        hint=hint,
        detail=document,
    )


def loaded_handlers(dump: dict[str, Any]) -> set[str]:
    """The runtime handlers a ``containerd config dump`` holds, in the version 2 or 3 layout.

    Example:: loaded_handlers(learner.file("fixtures/dump-node1.toml").toml())  # {"runc", "nvidia"}
    """
    return defined_runtimes(dump, CRI_V2) | defined_runtimes(dump, CRI_V3_RUNTIME)


def defined_runtimes(document: dict[str, Any], plugin: str = CRI_V2) -> set[str]:
    """Runtime names a file defines under the plugin's ``containerd.runtimes`` (empty if none).

    Example:: defined_runtimes(learner.file(DROPIN).toml())  # {"nvidia"}
    """
    runtimes = dig(document, "plugins", plugin, "containerd", "runtimes")
    return set(runtimes) if isinstance(runtimes, dict) else set()


def find_key(document: Any, key: str, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every place ``key`` occurs in the nested tables, as (table path, value).

    Example:: find_key(config, "SystemdCgroup")  # [(("plugins", ..., "runc"), True)]
    """
    found = []
    if isinstance(document, dict):
        for name, value in document.items():
            if name == key:
                found.append((path, value))
            found.extend(find_key(value, key, (*path, name)))
    return found


def imports_of(document: dict[str, Any]) -> list[str]:
    """The ``imports`` globs: top level, or (trap) stranded under a table; strings only.

    Example:: imports_of(learner.file(MAIN).toml())  # ["/etc/containerd/conf.d/*.toml"]
    """
    imports = document.get("imports")
    if imports is None:
        stranded = find_key(document, "imports")
        imports = stranded[0][1] if stranded else []
    if isinstance(imports, str):
        imports = [imports]
    return [entry for entry in imports if isinstance(entry, str)] if isinstance(imports, list) else []


def parse_key_path(text: str) -> tuple[str, ...] | None:
    """The table path a dotted TOML key spells (``a."b.c".d`` -> ("a", "b.c", "d")), or None.

    Example:: parse_key_path(values["CONFLICT_TABLE"]) == ("plugins", CRI_V2, "containerd", "runtimes")
    """
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    try:
        document = tomllib.loads(f"{text} = 0")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    node: Any = document
    while isinstance(node, dict) and len(node) == 1:
        ((name, node),) = node.items()
        path.append(name)
    return tuple(path) if node == 0 else None
