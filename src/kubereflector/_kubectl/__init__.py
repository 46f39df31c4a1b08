"""kubectl's printing conventions (private), one copy each, for the command line's
tables (:mod:`kubereflector.cli`) and the emulator's Table answers that
``kubectl get`` prints (:mod:`kubereflector.testing.apiserver`).

``duration``: the AGE column (apimachinery's ``duration.HumanDuration``);
``jsonpath``: the JSONPath subset of CRDs' ``additionalPrinterColumns``.
Pure functions, no I/O.
"""
