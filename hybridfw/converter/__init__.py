"""The to_static converter (AST transformers and runtime helpers), filled by the to_static work."""
