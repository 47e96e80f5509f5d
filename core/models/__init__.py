"""Models: the registry (registry.py: ModelSpec, build_model, trace schema) and one module per model."""
