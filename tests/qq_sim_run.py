"""A real qq run of the projective sim agent, for tests that read or edit its measurements."""

from __future__ import annotations

from pathlib import Path

from lmaudit.pipeline import run

CONF = Path(__file__).resolve().parents[1] / "conf"


def run_two_sim_items(root: Path, *overrides: str) -> Path:
    """Measure and analyse items s1-01 and s3-01 (both mappings) with the projective sim agent,
    MLflow off, everything under ``root`` (``overrides`` after the defaults); the run folder."""
    from hydra import compose, initialize_config_dir

    from lmaudit.config.store import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "model=sim_projective",
                "study.items.ids=[s1-01,s3-01]",
                "mlflow.enabled=false",
                *overrides,
                f"paths.results={root / 'results'}",
                f"paths.cache={root / 'cache'}",
                f"out_dir={root / 'run'}",
                "progress=false",
            ],
        )
    run(cfg)
    return root / "run"
