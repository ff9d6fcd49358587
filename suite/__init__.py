"""layerscale-suite: when does LayerScale let a Vision Transformer train stably at depth, and what does it cost?"""

__version__ = "0.1.0"
