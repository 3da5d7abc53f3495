"""Suites: the format, video I/O, label tables, splits and (``data.generate``) the synthetic BabyAI suites.

The generator (minigrid) is imported from ``data.generate`` where it is used, not here.
"""

from data.labels import (aggregate, annotator_accuracy, dawid_skene, fleiss_kappa, krippendorff_alpha,
                         label_table, majority_vote, marker_spread, reference_table)
from data.splits import grouped_split, holdout_split, split_groups
from data.suite import (Annotation, Continuation, Problem, Reference, Scenario, Suite, SuiteFormatError,
                        SuiteInfo, validate_suite, write_jsonl)
from data.video import Clip, VideoError, VideoInfo, read_video, video_info, write_video

__all__ = [
    "Annotation", "Clip", "Continuation", "Problem", "Reference", "Scenario", "Suite", "SuiteFormatError",
    "SuiteInfo", "VideoError", "VideoInfo", "aggregate", "annotator_accuracy", "dawid_skene", "fleiss_kappa",
    "grouped_split", "holdout_split", "split_groups", "krippendorff_alpha", "label_table", "majority_vote", "marker_spread",
    "read_video", "reference_table", "validate_suite", "video_info", "write_jsonl", "write_video",
]
