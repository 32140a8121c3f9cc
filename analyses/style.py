"""One look for every figure: a fixed colour per model, one theme, relative depth on shared axes.

* :func:`model_color` gives every model the same colour in every figure. Colours come from
  seaborn's ``colorblind`` palette (Wong's colour-blind-safe set); the models of the demo and the
  registry's common names have fixed slots, any other name gets a slot from a hash of its name, so
  a colour never depends on which other models share the figure.
* :func:`use_theme` applies the one theme (seaborn's ``ticks`` style, paper context) that every
  ``plot`` function draws under.
* :func:`relative_depth` puts models of different depth on one axis (layer / L).

    $ python -c "from analyses.style import model_color; print(model_color('minilm-l6'))"
"""

from __future__ import annotations

import hashlib

import numpy as np

# Fixed slots (indices into the 10-colour palette) for the names the demo and README use.
FIXED = {  # colorblind palette: 0 blue, 1 orange, 2 green, 3 vermillion, 4 pink, 5 tan, 6 light pink, 7 grey,
    #          8 yellow, 9 sky blue; the demo's encoders get the six most distinct
    "minilm-l6": 0, "slstm-small": 1, "bert-small": 2, "albert-small": 4, "mpnet-base": 7, "mog-small": 9,
    "mog-small-sum": 5, "mog-small-selfgate": 8, "mog-small-wg": 3, "mog-small-6l": 6,
    "gpt2-small-base": 2, "gpt2-small-recurrent": 1, "smollm2-135m": 3, "gemma3-270m": 5,
    "minilm-l6-lens": 0, "bert-small-lens": 2,
    # the tests' tiny models: pairs drawn together get different colours
    "tiny-bert": 0, "tiny-slstm": 1, "tiny-albert": 4, "tiny-mog": 9, "tiny-gpt2": 2, "tiny-gpt2-recurrent": 1,
    "tiny-bert-lens": 0, "tiny-convbert": 3, "tiny-llama": 7, "tiny-gemma3": 5,
    # analyses.speed's random-init architectures, coloured like their trained counterparts
    "slstm": 1, "bert": 2, "albert": 4,
}


def palette() -> list[str]:
    """The 10 colour-blind-safe colours, as hex strings."""
    import seaborn as sns

    return sns.color_palette("colorblind", 10).as_hex()


def model_color(name: str) -> str:
    """The colour of ``name`` in every figure (a hex string)."""
    colors = palette()
    if name in FIXED:
        return colors[FIXED[name]]
    slot = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(colors)
    return colors[slot]


def use_theme() -> None:
    """The theme every figure is drawn in (seaborn ``ticks``, paper context, readable fonts)."""
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks", font_scale=1.1,
                  rc={"axes.grid": True, "grid.alpha": 0.3, "savefig.dpi": 200})


def relative_depth(n_layers: int) -> np.ndarray:
    """(L+1,) layer l / L for l = 0..L: the x axis when models of different depth share a plot."""
    return np.arange(n_layers + 1) / max(n_layers, 1)
