"""Suites: the format, video I/O, label tables, splits, simulated annotators and (``autorater.data.generate``) the
suite generator over the worlds (``autorater.data.worlds``).

The worlds' simulators (minigrid, Meta-World and MuJoCo) are imported inside the worlds when a suite is
generated, not here.
"""

from autorater.data.annotators import simulate_annotations
from autorater.data.files import json_text, jsonl_text, write_text_atomic
from autorater.data.generate import generate_suite, swap_instructions
from autorater.data.imports.common import ImportReport
from autorater.data.imports.table import import_table
from autorater.data.labels import (
    aggregate,
    annotator_accuracy,
    dawid_skene,
    fleiss_kappa,
    krippendorff_alpha,
    label_table,
    majority_vote,
    marker_spread,
    reference_table,
)
from autorater.data.splits import grouped_split, holdout_split, split_groups
from autorater.data.stats import agent_rule_balanced_accuracy, format_stats, suite_stats
from autorater.data.suite import (
    Annotation,
    Continuation,
    Problem,
    Reference,
    Scenario,
    Suite,
    SuiteFormatError,
    SuiteInfo,
    load_truth,
    validate_suite,
    write_jsonl,
)
from autorater.data.video import (
    Clip,
    DecodeTimeout,
    VideoError,
    VideoInfo,
    VideoLimits,
    read_video,
    video_info,
    write_video,
)
from autorater.data.worlds import WORLDS, load_world, world_of

__all__ = [
    "WORLDS", "Annotation", "Clip", "Continuation", "DecodeTimeout", "ImportReport", "Problem", "Reference",
    "Scenario", "Suite", "SuiteFormatError", "SuiteInfo", "VideoError", "VideoInfo", "VideoLimits",
    "agent_rule_balanced_accuracy", "aggregate", "annotator_accuracy", "dawid_skene", "fleiss_kappa", "format_stats",
    "generate_suite", "grouped_split", "holdout_split", "import_table", "json_text", "jsonl_text", "krippendorff_alpha",
    "label_table", "load_truth", "load_world", "majority_vote", "marker_spread", "read_video", "reference_table",
    "simulate_annotations", "split_groups", "suite_stats", "swap_instructions", "validate_suite", "video_info",
    "world_of", "write_jsonl", "write_text_atomic", "write_video",
]
