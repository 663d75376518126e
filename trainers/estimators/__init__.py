"""The built-in step-level advantage estimators (one module each); see ``trainers.advantages``."""
