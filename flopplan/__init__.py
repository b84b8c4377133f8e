"""flopplan: where RL post-training compute goes. The core is torch-free."""

__version__ = "0.1.0"
