"""Check a saved SAE (:func:`analyses.sae.io.load_sae`): its checksums, that its cfg.json matches its weights, and,
if asked, that it reads the states of a given model (by the registry's fingerprint) and layer. Prints one line
saying what it is; a check that fails is one ``error:`` line and exit status 2.

    $ python -m analyses.sae.check out/sae/minilm-l6/layer3-seed0 [--model minilm-l6] [--layer 3]
"""

from __future__ import annotations

from dataclasses import dataclass

from analyses.sae.io import load_sae
from probes.config import arg, parse_config, run_main


@dataclass
class CheckConfig:
    """Check a saved SAE: its checksums, that cfg.json matches its weights, and which model and layer it reads."""

    folder: str = arg("", "the SAE's folder (cfg.json, sae_weights.safetensors, checksums.sha256)", positional=True)
    model: str = arg("", "the model the SAE must read (a registry name; its fingerprint is compared)")
    layer: int | None = arg(None, "the layer the SAE must read (0 = embeddings)")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(CheckConfig, argv, (__doc__ or "").split("\n\n")[0])
    fingerprint = None
    if cfg.model:
        from probes.checkpoints.names import get_spec

        fingerprint = get_spec(cfg.model).fingerprint()
    sae, record = load_sae(cfg.folder, fingerprint, cfg.layer)
    print(f"{cfg.folder}: a {sae.shape.kind} SAE (d_in {sae.shape.d_in}, {sae.shape.width} latents, k {sae.shape.k}) "
          f"of {record.model} layer {record.layer}, seed {record.seed}: checksums and cfg.json match its weights")


if __name__ == "__main__":
    run_main(main)
