"""Analysis and curation of suite versions: what the labels say about the agents, and what the next version holds.

- ``leaderboard``: per-agent success rates with honest 95% intervals from a labels folder; ``report``: its table,
  figures and HTML page.
- ``versions``: scores across suite versions and tags; ``version_report``: that board's table, plots and page;
  ``saturation``: does a version still tell today's agents apart?
- ``propose``: the next version's mix, chosen from a pool of candidate scenarios; ``tags``: tags a team adds to a
  suite's scenarios.

It reads the labelling job's folders (``autorater.serving.labelling.folder``) and the suites; nothing in serving
imports it.
"""

from autorater._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    "autorater.serving.analysis.propose": ["propose_version"],
    "autorater.serving.analysis.report": ["format_leaderboard", "leaderboard_figures", "write_report"],
    "autorater.serving.analysis.tags": ["stamp_version", "tag_suite"],
    "autorater.serving.analysis.version_report": ["format_version_board", "write_version_report"],
    "autorater.serving.analysis.versions": ["version_board"],
})
