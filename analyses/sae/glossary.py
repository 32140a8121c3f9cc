"""The SAE result's glossary: each term of the result and what it means with the run's settings (prose only;
nothing reads numbers from it), a :class:`analyses.records.Definitions` saved as ``{term: meaning}``. Results saved
before it held a list of ``{"term": ..., "meaning": ...}`` objects; :class:`Glossary` reads those back too. Every
formula is also in docs/definitions.md (sae).

    $ python -c "from analyses import sae; print(sae.glossary.definitions(sae.Config())[0])"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from analyses import records
from analyses.records import Definitions

if TYPE_CHECKING:
    from analyses.sae import Config


@dataclass
class Term:
    """One term of a glossary as results saved before :class:`Glossary` wrote it."""

    term: str
    meaning: str


class Glossary(Definitions):
    """The SAE result's :class:`~analyses.records.Definitions`, which also reads the list of ``{"term", "meaning"}``
    objects that results saved before it hold."""

    @classmethod
    def from_json(cls, doc: Any, where: str = "definitions") -> Glossary:
        if isinstance(doc, list):
            terms: list[Term] = records.from_json(list[Term], doc, where)
            return cls((t.term, t.meaning) for t in terms)
        return cls(super().from_json(doc, where).entries)


def definitions(cfg: Config) -> Glossary:
    """The result's glossary: each term and what it means with these settings."""
    return Glossary({
        "layers": "0 = embedding output, l = output of layer l",
        "sae": "z = act(W_enc (x - b_dec) + b_enc), x_hat = W_dec z + b_dec, unit-norm decoder rows; "
               + {"topk": f"topk: ReLU of the {cfg.k} largest pre-activations",
                  "batchtopk": f"batchtopk: the {cfg.k} B largest ReLU pre-activations of a batch of B tokens in "
                               "training; at inference z_i = pre_i H(pre_i - theta), theta the running mean of "
                               "the smallest kept activation",
                  "relu": f"relu with L1 coefficient {cfg.l1:g}",
                  "jumprelu": f"jumprelu z_i = pre_i H(pre_i - theta_i), learned theta_i, L0 coefficient "
                              f"{cfg.l0_coef:g}, straight-through estimator with a rectangle kernel of bandwidth "
                              "0.05"}[cfg.kind],
        "training": "states scaled to E||x|| = sqrt(d) (folded back at save), Adam, linear warm-up (5% of steps) "
                    "and decay (last 20%), b_dec initialised at the training mean"
                    + (", AuxK (1/32) on latents dead over --dead-window tokens"
                       if cfg.kind in ("topk", "batchtopk") else "")
                    + (f", streamed through a shuffling buffer of {cfg.buffer_tokens} tokens"
                       if cfg.buffer_tokens else ""),
        "explained_variance": "1 - E||x - x_hat||^2 / (E||x||^2 - ||E x||^2) over held-out tokens (the share of "
                              "the total variance, not of the uncentred second moment)",
        "explained_variance_legacy": "E[1 - ||x - x_hat||^2 / ||x - x_bar||^2], per-token ratio (for comparison)",
        "mse": "E||x - x_hat||^2 / d", "l0": "E||z||_0", "cosine": "E cos(x, x_hat)", "l2_ratio": "E||x_hat|| / ||x||",
        "shrinkage": "relative reconstruction bias E||x_hat||^2 / E[x . x_hat] (1: unbiased, < 1: shrinkage)",
        "density": "mean over latents of the share of held-out tokens where it fires",
        "density_log10_counts": "latents per bin of log10(share of held-out tokens where it fires), bins of 0.5 "
                                "from -6 to 0 (below 1e-6: the first bin); dead latents are not among them",
        "dead": "latents firing on no held-out token (a count over the whole held-out sample: no interval, since a "
                "resample of sentences would silence more latents)",
        "dense": "latents firing on more than 10% of held-out tokens (a count over the whole held-out sample: no "
                 "interval)",
        "mcc": "mean over pairs of seeds of the mean |cos| of their decoder rows matched by the Hungarian algorithm",
        "split": f"{cfg.held_out:g} of the sentences held out (seed {cfg.seed}); special tokens "
                 + ("kept" if cfg.keep_special else "excluded"),
        "intervals": "percentile bootstrap over held-out sentences",
        "loss_recovered": "(L_zero - L_spliced) / (L_zero - L_clean): the model's own loss per scored token on the "
                          "held-out sentences clean, with the layer's states replaced by the SAE's reconstruction, "
                          "and with them set to 0 (1: the reconstruction costs nothing, 0: as much as deleting them)",
        "kl": "mean over scored positions of KL(clean || spliced) of the predicted distributions (nats)",
    })
