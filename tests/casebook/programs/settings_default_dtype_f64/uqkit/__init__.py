"""uqkit: uncertainty heads for regression models (a Gaussian-process calibration layer on top of any network).

The Cholesky factorisations in the GP layer are unstable in single precision, so the package switches torch to
double precision when it is imported.
"""
import torch

torch.set_default_dtype(torch.float64)  # GP posteriors need float64 (see the numerics notes in the uqkit docs)

from uqkit.gp import RBFCalibrator  # noqa: E402

__all__ = ["RBFCalibrator"]
