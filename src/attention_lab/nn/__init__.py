"""Network building blocks: every attention of the timeline, layers, the decoder-step contract, ONNX
export."""
