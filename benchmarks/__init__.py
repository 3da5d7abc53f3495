"""Throughput and quality benchmarks (``python -m benchmarks.<name>``): each prints a table and writes JSON, and says
what it builds at a tiny size (its ``tiny(tmp_path)``; ``tiny = None``: nothing of its own), which
tests/test_benchmark_modules.py runs for every module."""


def rate_tiny(config):
    """A model of ``config`` built and run on two clips of random frames at its decoded size: its P(success) logits."""
    import torch

    from autorater.models import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(config.replace(failure_modes=["timeout"])).eval()
    size, frames = config.decoded_size(), min(config.clip_frames, 8)
    x = {"frames": torch.randint(0, 256, (2, frames, size, size, 3), dtype=torch.uint8),
         "times_s": torch.arange(frames).float().repeat(2, 1) / 8, "takeover_s": torch.zeros(2),
         "instructions": ["open the drawer", "go to the red ball"]}
    with torch.no_grad():
        return model(**x).success_logit
