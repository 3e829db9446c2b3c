"""A PyTorch CNN on MNIST, trained across Flower SuperNodes by any of privopt's methods."""
