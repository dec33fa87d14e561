"""Model providers for the stage actors, and the recorded-answer layer in front of them."""
