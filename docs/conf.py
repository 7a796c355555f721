"""Sphinx configuration: MyST pages, executed guide pages, pre-executed notebooks, generated API and benchmarks."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS)]
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ["PBMARL_SMOKE"] = "1"  # guide pages run on the test suite's small budgets
os.environ.pop("MPLBACKEND", None)  # the kernels draw inline
os.environ["TQDM_DISABLE"] = "1"  # a progress bar frozen on a static page is noise

import gen_api  # noqa: E402
import gen_benchmarks  # noqa: E402
from docutils import nodes  # noqa: E402

import notebooks  # noqa: E402
import pbmarl  # noqa: E402

project = "pbmarl"
author = "the pbmarl developers"
copyright = "the pbmarl developers"
release = version = pbmarl.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon"]
templates_path = ["_templates"]
exclude_patterns = ["_build", "README.md", "**.ipynb_checkpoints", "jupyter_execute"]
html_theme = "furo"
html_title = f"pbmarl {release}"
html_static_path: list[str] = []
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False

# --- MyST and notebooks ------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "force"  # guide pages (MyST notebooks) run at every build: their code is checked
nb_execution_excludepatterns = ["tutorials/*.ipynb", "notebooks/*.ipynb"]  # executed by notebooks.py, stamped
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 300
nb_execution_in_temp = True  # run folders a page writes never land in docs/
nb_merge_streams = True
# no widget manager from a CDN (require.js, @jupyter-widgets/html-manager): the site works offline, and a widget
# needs a live kernel anyway (docs/notebooks.py shows a note in its place)
nb_ipywidgets_js: dict[str, dict[str, str]] = {}

if os.environ.get("PBMARL_DOCS_NOTEBOOKS", "1") == "0":  # quick local builds of the prose only
    exclude_patterns += ["tutorials/*.ipynb", "notebooks/*.ipynb"]
    suppress_warnings = ["toc.empty_glob"]
else:  # an output from an older notebook or an older library is never published as current
    _lib = notebooks.library_hash()
    _stale = [why for why in (notebooks.stale(p, _lib) for p in notebooks.sources()) if why]
    if _stale:
        raise RuntimeError("stale notebook outputs; run `python docs/build.py` (it executes them first):\n  "
                           + "\n  ".join(_stale))

# --- API reference -----------------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = True
python_use_unqualified_type_names = True
gen_api.write(DOCS / "api")
gen_benchmarks.write(DOCS / "benchmarks", ROOT / "benchmarks" / "results")

# --- cross-references: nitpicky, with external packages (no inventories offline) named here ------------------
nitpicky = True
_EXTERNAL = ["numpy", "np", "pandas", "pd", "torch", "nn", "gymnasium", "gym", "scipy", "matplotlib", "pyspiel",
             "open_spiel", "ray", "pettingzoo", "mpe2", "ipywidgets", "IPython", "tqdm", "pygambit", "nashpy",
             "clarabel", "highspy", "collections", "concurrent", "pathlib", "os", "io", "types", "typing_extensions",
             "threading", "multiprocessing", "enum", "dataclasses", "abc", "random", "contextlib", "datetime"]
nitpick_ignore_regex = [("py:.*", rf"{name}(\..*)?") for name in _EXTERNAL]
# external types that annotations name without their module (imported under TYPE_CHECKING or re-exported)
nitpick_ignore_regex += [("py:class", r"(NDArray|ArrayLike|DTypeLike|Figure|Axes|DataFrame|Series|Tensor|Module|"
                                      r"Generator|SeedSequence|Path|Enum|Space|Box|Discrete|MultiDiscrete|Env|"
                                      r"Styler|OpenSpielTabularPolicy)")]


# The project writes a config field's docstring as prose ("Hidden widths (paper: 64)."), not napoleon's
# "type: description": the type comes from the annotation, so the whole docstring is the description.
from sphinx.ext.napoleon.docstring import GoogleDocstring  # noqa: E402


def _prose_attribute(self):  # noqa: ANN001, ANN202
    lines = [self._lines.next(), *self._dedent(self._consume_to_end())]
    return "", self.__class__(lines, self._config).lines()


GoogleDocstring._consume_inline_attribute = _prose_attribute


def _resolve_public(app, env, node, contnode):  # noqa: ANN001, ANN202
    """A reference to where a public object is defined (``pbmarl.games.base.Game``) goes to its documented name
    (``pbmarl.Game``), so the reference survives modules moving. A reference to an existing pbmarl object that
    has no page of its own (a config class, a record, a type alias named in a signature) is set as code, without
    a link; a reference to nothing that exists still fails the build."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    canonical = app.env.pbmarl_canonical
    found = _lookup(target, canonical)
    if found is None and "." not in target:
        found = app.env.pbmarl_by_short.get(target)
    if found is None:
        if "[" in target:  # a generic annotation that autodoc split at a comma ("dict[str"): not a name at all
            return nodes.literal(target, contnode.astext())
        if _exists(target) or ("." not in target and target in _short_index()):
            return nodes.literal(target, contnode.astext())
        return None
    hits = env.get_domain("py").resolve_any_xref(env, node["refdoc"], app.builder, found, node, contnode)
    return hits[0][1] if hits else None


def _exists(target: str) -> bool:
    if not target.startswith("pbmarl."):
        return False
    parts = target.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


_SHORT: set[str] = set()


def _short_index() -> set[str]:
    """Names defined at module level anywhere in pbmarl (classes, type aliases, type variables)."""
    if not _SHORT:
        for name, module in list(sys.modules.items()):
            if name.startswith("pbmarl") and module is not None:
                _SHORT.update(k for k in vars(module) if not k.startswith("_"))
    return _SHORT


def _lookup(target: str, canonical: dict[int, str]) -> str | None:
    if not target.startswith("pbmarl."):
        return None
    parts = target.split(".")
    for cut in range(len(parts), 1, -1):  # the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        rest = parts[cut:]
        for i, attr in enumerate(rest):
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
            name = canonical.get(id(obj))
            if name is not None:
                return ".".join([name, *rest[i + 1:]])
        return canonical.get(id(obj))
    return None


def _index(app):  # noqa: ANN001, ANN202
    canonical = gen_api.canonical_names()
    app.env.pbmarl_canonical = canonical
    by_short: dict[str, str] = {}
    for name in canonical.values():
        by_short.setdefault(name.rsplit(".", 1)[1], name)
    app.env.pbmarl_by_short = by_short


_SECTION = re.compile(r"^\s*(Args|Arguments|Attributes|Example|Examples|Note|Notes|Returns|Return|Raises|Yields|"
                      r"See Also|Warning|Warnings|Parameters|Keyword Args|Other Parameters|References|Todo|Methods)"
                      r"\s*:\s*$")


def _indented_code_is_literal(app, what, name, obj, options, lines):  # noqa: ANN001, ANN202
    """The project's docstrings show code as an indented block after a blank line (``    run = pb.PSRO(...)``),
    Markdown's way; reST reads that as a block quote and fails on a deeper continuation line. A lone ``::``
    before such a block makes it the literal block it is meant to be (napoleon's sections are left alone)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        starts_block = (line.startswith("    ") and i > 0 and not lines[i - 1].strip()
                        and not line.lstrip().startswith(">>>"))
        if starts_block:
            before = next((p for p in reversed(lines[:i]) if p.strip()), "")
            if not before.startswith(" ") and not before.rstrip().endswith("::") and not _SECTION.match(before):
                out += ["::", ""]
        out.append(line)
    lines[:] = out


def setup(app):  # noqa: ANN001, ANN201
    app.connect("autodoc-process-docstring", _indented_code_is_literal, priority=400)
    app.connect("builder-inited", _index)
    app.connect("missing-reference", _resolve_public)
    return {"parallel_read_safe": True}
