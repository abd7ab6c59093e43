"""What several methods share: the model, the data, quantization, framing and file writes."""
