"""Drop-in front ends of georag's kernels for other libraries' users
(:mod:`georag.integrations.grc`: GraphRicciCurvature)."""
