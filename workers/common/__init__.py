"""What several methods share: the model, the data, quantization."""
