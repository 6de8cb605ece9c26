"""azshogi: AlphaZero for shogi on one workstation."""
__version__ = "0.1.0"
