"""Live dashboards for bidlab learners (needs the ``viz`` extra)."""
