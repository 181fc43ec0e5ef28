"""What a result that found nothing rules out: equivalence bounds and the smallest detectable effect (3.2, 4.2).

An interval that includes 0 says the data do not show an effect; it does not say the effect is 0. Two numbers turn
such a null into a statement:

* an **equivalence test** (two one-sided tests, TOST) against a margin stated in advance: the effect is shown to lie
  inside (-margin, margin) when the 1 - 2 alpha interval does (:func:`gain_bounds`);
* the **smallest effect the test would detect** with a stated power (:func:`gain_bounds`), from the estimate's
  standard error; for a pooled share over sentences that is :func:`ratio_standard_error`, the delta method for a
  ratio of sums.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from mha.core.validation import InputError, as_real_array, check_finite_number

__all__ = ["ratio_standard_error", "gain_bounds"]


def ratio_standard_error(numerators: npt.ArrayLike, denominators: npt.ArrayLike) -> np.ndarray:
    """Standard error of a pooled ratio sum(numerators) / sum(denominators) over units (sentences): (...,).

    ``numerators`` (units, ...), ``denominators`` (units,). The delta method for a ratio of sums (the
    cluster-robust standard error of a mean over pairs, with sentences as clusters), with the small-sample factor
    units / (units - 1).
    """
    numerators = as_real_array("numerators", numerators, meaning="(units, ...)")
    denominators = as_real_array("denominators", denominators, meaning="(units,)")
    if denominators.ndim != 1 or numerators.shape[0] != denominators.shape[0] or len(denominators) < 2:
        raise ValueError(f"numerators {numerators.shape} and denominators {denominators.shape} need the same number "
                         "of units (at least 2) on their first axis.")
    total = denominators.sum()
    if total <= 0:
        raise ValueError("the denominators sum to 0: there is nothing to take a ratio of.")
    ratio = numerators.sum(axis=0) / total
    shape = (-1,) + (1,) * (numerators.ndim - 1)
    residuals = numerators - ratio * denominators.reshape(shape)  # (units, ...)
    units = len(denominators)
    return np.sqrt(units / (units - 1) * (residuals**2).sum(axis=0)) / total


def gain_bounds(gain: npt.ArrayLike, standard_error: npt.ArrayLike, margin: float, *, alpha: float = 0.05,
                power: float = 0.8) -> dict[str, np.ndarray]:
    """What a measured gain rules out: an equivalence test against ``margin`` and the smallest detectable gain.

    ``gain`` and ``standard_error`` are arrays of the same shape (normal approximation). Returns
    ``tost_p`` (the larger of the two one-sided p-values of H0: gain <= -margin and H0: gain >= margin),
    ``equivalent`` (``tost_p < alpha``: the gain lies within +-margin), ``low``/``high`` (the 1 - 2 alpha interval
    that the TOST reads), ``test_p`` (two-sided p of gain = 0) and ``detectable`` (the smallest true gain a
    two-sided ``alpha`` test finds with probability ``power``: (z(1 - alpha/2) + z(power)) * standard error).
    """
    gain = as_real_array("gain", gain, meaning="a number or an array of gains")
    se = as_real_array("standard_error", standard_error, meaning="standard errors of the same shape as gain")
    try:
        np.broadcast_shapes(gain.shape, se.shape)
    except ValueError:
        raise InputError(f"gain has shape {gain.shape} and standard_error {se.shape}; give each gain its standard "
                         "error: arrays of the same shape, or one of them a single number.") from None
    margin = check_finite_number("margin", margin, positive=True, meaning="the smallest gain that would matter")
    alpha = check_finite_number("alpha", alpha, positive=True, meaning="the test's level, below 0.5")
    power = check_finite_number("power", power, positive=True, meaning="below 1")
    if np.any(se <= 0) or not 0 < margin or not 0 < alpha < 0.5 or not 0 < power < 1:
        raise ValueError("standard errors and the margin must be positive, alpha in (0, 0.5), power in (0, 1).")
    lower_p = norm.sf((gain + margin) / se)  # H0: gain <= -margin
    upper_p = norm.cdf((gain - margin) / se)  # H0: gain >= margin
    tost_p = np.maximum(lower_p, upper_p)
    z = norm.ppf(1 - alpha)
    return {"tost_p": tost_p, "equivalent": tost_p < alpha, "low": gain - z * se, "high": gain + z * se,
            "test_p": 2 * norm.sf(np.abs(gain) / se),
            "detectable": (norm.ppf(1 - alpha / 2) + norm.ppf(power)) * se}
